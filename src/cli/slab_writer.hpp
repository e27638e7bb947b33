// Writing a dataset whose values are computed on the fly, in boxes of bounded size, so a file
// of any N is written with the same small memory.
#pragma once

#include "attnbatch/io/h5_dataset.hpp"

#include <cstddef>
#include <functional>

namespace attnbatch::cli {

inline constexpr std::size_t default_slab_bytes = std::size_t{64} << 20;

// Computes the `count` consecutive values along the last axis that start at multi-index
// `index` of the dataset (one "run"), in double; the writer converts them to `type`.
using RunFill = std::function<void(const io::Dims& index, std::size_t count, double* out)>;

// Fills the whole dataset, box by box in row-major order. A box is made of whole leading rows
// when one fits in `max_bytes` (in memory as `type`), else it is cut along the next axis, as
// chunk_shape() does; one box is in memory at a time. `type` is f32, f64 or i32.
void write_computed(const io::Dataset& dataset, io::MemType type, std::size_t max_bytes, const RunFill& fill);

}  // namespace attnbatch::cli
