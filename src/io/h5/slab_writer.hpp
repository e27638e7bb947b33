// Writing a dataset whose values are computed on the fly, in boxes of bounded size, so a file
// of any N is written with the same small memory.
#pragma once

#include "attnbatch/io/h5/computed_values.hpp"
#include "attnbatch/io/h5/dataset.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace attnbatch::io::detail {

// Fills the whole dataset, box by box in row-major order, from `fill` (one run along the last
// axis per call). A box is made of whole leading rows when one fits in `max_bytes` (in memory
// as `type`), else it is cut along the next axis, as chunk_shape() does; one box is in memory
// at a time. `type` is f32, f64 or i32.
void write_computed(const Dataset& dataset, MemType type, std::size_t max_bytes, const ValueSource& fill);

// Creates `path` of `type` (f32, f64 or i32: float32, float64 or int32 in the file), chunked
// about 1 MiB along whole rows, labels its axes, fills it from `fill` in slabs of at most
// `slab_bytes` and closes it.
WrittenDataset write_computed_dataset(const File& file, const std::string& path, MemType type, const Dims& dims,
                                      const std::vector<std::string>& labels, std::size_t slab_bytes,
                                      const ValueSource& fill);

}  // namespace attnbatch::io::detail
