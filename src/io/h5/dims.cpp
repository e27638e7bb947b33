// Shapes as text and as element counts.
#include "attnbatch/io/h5/dims.hpp"

namespace attnbatch::io {

std::string shape_text(const Dims& dims) {
    std::string text = "[";
    for (std::size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
    return text + "]";
}

std::size_t element_count(const Dims& dims) noexcept {
    std::size_t count = 1;
    for (const std::uint64_t extent : dims) count *= static_cast<std::size_t>(extent);
    return count;
}

}  // namespace attnbatch::io
