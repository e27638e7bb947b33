// Rotary position embeddings (RoPE) in the pair layout of the Hugging Face implementation
// (`rotate_half`): in a head vector of even width d, element i < d/2 is paired with i + d/2,
// and the pair at position p turns by the angle p * theta^(-2i/d):
//   x'_i       = x_i cos - x_{i+d/2} sin
//   x'_{i+d/2} = x_{i+d/2} cos + x_i sin
// The position is the row's absolute index in its sequence (first_position + row), so rows
// rotated in any split of a sequence are those rows of the whole sequence, bit for bit.
//
// The angles are computed in double and their cosines and sines rounded to float once, in a
// table (rope_table) that every head and sequence shares; the rotation itself is float
// arithmetic in a fixed order, so results do not depend on threads or on the split.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attnbatch/kernels/attention.hpp"

namespace attnbatch::kernels {

// cos and sin for positions [first_position, first_position + rows) and the d/2 frequencies
// of a head of width `dim` (even): two (rows, dim/2) row-major arrays.
void rope_table(double theta, int dim, std::int64_t first_position, int rows, float* cos_table, float* sin_table);

struct RopeParams {
    const float* in = nullptr;   // (B, heads, rows, dim) through in_strides; may equal `out`
    TensorStrides in_strides;
    float* out = nullptr;        // (B, heads, rows, dim) through out_strides
    TensorStrides out_strides;
    int batch = 0, heads = 0, rows = 0, dim = 0;
    // (B): rows at or past a sequence's length are copied unrotated (their values are masked
    // or zero anyway); null: every row is rotated.
    const std::int32_t* lengths = nullptr;
    int row_offset = 0;  // the position of row 0 minus the table's first position (>= 0)
    const float* cos_table = nullptr;  // from rope_table, covering row_offset + rows positions
    const float* sin_table = nullptr;
};

// Throws std::invalid_argument on an odd or non-positive dim or a null pointer.
void apply_rope(const RopeParams& params, int threads);

// The same rotation in double, for the reference and `verify`: one head row of width dim at
// absolute position `position`, in place.
void apply_rope_f64(double theta, int dim, std::int64_t position, double* row);

}  // namespace attnbatch::kernels
