// Chunk shapes for the output datasets: about `target_bytes` each, made of whole sequences
// along axis 0 when a sequence is smaller than that, so a unit of whole sequences maps onto
// whole chunks (one writer per chunk, no read-modify-write of compressed chunks). A sequence
// larger than the target is split along the next axis, and so on, so every chunk stays
// bounded.
#pragma once

#include "attnbatch/io/h5/dims.hpp"

#include <cstddef>

namespace attnbatch::io {

inline constexpr std::size_t default_chunk_bytes = std::size_t{1} << 20;

// Every extent of `dims` must be at least 1.
Dims chunk_shape(const Dims& dims, std::size_t element_size, std::size_t target_bytes = default_chunk_bytes);

}  // namespace attnbatch::io
