// Writing a dataset whose values are computed on the fly, in boxes of bounded size, so a file
// of any N is written with the same small memory.
#pragma once

#include "attnbatch/io/h5/dataset.hpp"
#include "attnbatch/io/input/input_writer.hpp"

#include <cstddef>

namespace attnbatch::io::detail {

// Fills the whole dataset, box by box in row-major order, from `fill` (one run along the last
// axis per call). A box is made of whole leading rows when one fits in `max_bytes` (in memory
// as `type`), else it is cut along the next axis, as chunk_shape() does; one box is in memory
// at a time. `type` is f32, f64 or i32.
void write_computed(const Dataset& dataset, MemType type, std::size_t max_bytes, const ValueSource& fill);

}  // namespace attnbatch::io::detail
