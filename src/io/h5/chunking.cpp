// Chunk shapes of about a target size, whole sequences first.
#include "attnbatch/io/h5/chunking.hpp"

#include <algorithm>
#include <stdexcept>

namespace attnbatch::io {

Dims chunk_shape(const Dims& dims, std::size_t element_size, std::size_t target_bytes) {
    if (dims.empty()) throw std::invalid_argument("chunk_shape: a scalar has no chunks");
    for (const std::uint64_t extent : dims) {
        if (extent == 0) throw std::invalid_argument("chunk_shape: every extent must be at least 1");
    }
    const std::size_t target_elements = std::max<std::size_t>(1, target_bytes / std::max<std::size_t>(1, element_size));
    Dims chunk = dims;
    // Walk inwards: take as many indices of each axis as fit the remaining budget; once an
    // axis must be cut, every axis outside it is already 1 and every axis inside it is whole.
    std::size_t inner = element_count(dims);
    for (std::size_t axis = 0; axis < dims.size(); ++axis) {
        inner /= static_cast<std::size_t>(dims[axis]);  // elements of one index of this axis
        if (inner * dims[axis] <= target_elements) break;  // this axis and all inner ones fit whole
        if (inner <= target_elements) {
            chunk[axis] = std::max<std::size_t>(1, target_elements / inner);
            break;
        }
        chunk[axis] = 1;
    }
    return chunk;
}

}  // namespace attnbatch::io
