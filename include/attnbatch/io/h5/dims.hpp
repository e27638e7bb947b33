// Shapes and boxes of datasets as io states them everywhere, without hdf5.h: the layers above
// see shapes and never HDF5's hsize_t (the wrappers convert where they call HDF5).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace attnbatch::io {

using Dims = std::vector<std::uint64_t>;

// A box of a dataset: `offset` and `count` per axis (empty vectors: the whole dataset).
struct Slab {
    Dims offset;
    Dims count;
};

// "[4, 16, 8]": how every message shows a shape (also of a tensor in another format, whose
// extents are signed).
std::string shape_text(const Dims& dims);
std::string shape_text(const std::vector<std::int64_t>& shape);

std::size_t element_count(const Dims& dims) noexcept;

}  // namespace attnbatch::io
