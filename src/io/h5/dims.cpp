// Shapes as text and as element counts.
#include "attnbatch/io/h5/dims.hpp"

namespace attnbatch::io {

namespace {

template <class Extents>
std::string bracketed(const Extents& extents) {
    std::string text = "[";
    for (std::size_t i = 0; i < extents.size(); ++i) text += (i ? ", " : "") + std::to_string(extents[i]);
    return text + "]";
}

}  // namespace

std::string shape_text(const Dims& dims) { return bracketed(dims); }
std::string shape_text(const std::vector<std::int64_t>& shape) { return bracketed(shape); }

std::size_t element_count(const Dims& dims) noexcept {
    std::size_t count = 1;
    for (const std::uint64_t extent : dims) count *= static_cast<std::size_t>(extent);
    return count;
}

}  // namespace attnbatch::io
