// Streaming over a whole dataset in bounded memory, in row-major order: the validation scans
// (non-finite values, length bounds) read blocks of at most `max_bytes`, whatever N is.
#pragma once

#include "attnbatch/io/h5/dims.hpp"
#include "attnbatch/io/h5/type_info.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>

namespace attnbatch::io {

class Dataset;  // dataset.hpp

inline constexpr std::size_t default_scan_bytes = std::size_t{64} << 20;

// Visits consecutive boxes covering the dataset in row-major order, each converted to
// `type` and at most max(max_bytes, one element) in memory. `visit(first, data, count)` gets
// the row-major index of the block's first element within the dataset and returns false to
// stop early. Whole leading rows are read together when they fit; otherwise the block
// splits along the next axis, and so on.
// `first` and `last` restrict the scan to rows [first, last) of the first axis.
void scan_blocks(const Dataset& dataset, std::size_t max_bytes, MemType type,
                 const std::function<bool(const Slab& block, const void* data, std::size_t count)>& visit,
                 std::uint64_t first = 0, std::uint64_t last = std::numeric_limits<std::uint64_t>::max());

// The multi-index of a row-major position in `dims`.
Dims unravel_index(std::uint64_t flat, const Dims& dims);

struct BadValue {
    Dims index;    // multi-index of the first offending element
    double value;  // as read in double precision: NaN, +-inf or a finite value beyond the limit
};

// Whether every value is finite and at most `bound` in magnitude (NaN and infinities fail): one
// branch-free pass the compiler vectorises, for checks over whole blocks that search value by
// value only where this says no. float with bound >= FLT_MAX tests the exponent bits alone.
bool all_within(const float* values, std::size_t count, double bound);
bool all_within(const double* values, std::size_t count, double bound);

// The first element that is NaN or infinite, or whose magnitude exceeds `max_magnitude`
// (pass FLT_MAX for float64 data that will be read as float32). Reads as double.
std::optional<BadValue> find_first_non_finite(const Dataset& dataset, std::size_t max_bytes = default_scan_bytes,
                                              double max_magnitude = std::numeric_limits<double>::infinity(),
                                              std::uint64_t first = 0,
                                              std::uint64_t last = std::numeric_limits<std::uint64_t>::max());

}  // namespace attnbatch::io
