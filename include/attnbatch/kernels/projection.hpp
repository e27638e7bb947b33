// Projections Y = X W + b per sequence (row-vector convention, W stored [in, out]), with the
// attention kernel's register-blocked micro-kernel. Each sequence is computed by one thread
// in a fixed order, so results do not depend on the thread count or on which other
// sequences share the call. Rows at or past a sequence's length are written as zeros.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attnbatch/kernels/attention.hpp"

namespace attnbatch::kernels {

// W packed into column panels for one instruction set; the caller owns the memory.
std::size_t projection_packed_floats(int in, int out, Isa isa);
void pack_projection_weights(const float* w, int in, int out, float* packed, Isa isa);

struct ProjectionParams {
    const float* x = nullptr;  // (B, L, in) with the strides below; last axis contiguous
    std::ptrdiff_t x_seq_stride = 0, x_row_stride = 0;
    float* y = nullptr;        // (B, L, out)
    std::ptrdiff_t y_seq_stride = 0, y_row_stride = 0;
    int batch = 0, len = 0, in = 0, out = 0;
    const std::int32_t* lengths = nullptr;  // (B) rows computed; null: all L
    const float* packed_w = nullptr;        // from pack_projection_weights with the same isa
    const float* bias = nullptr;            // (out) or null
};

std::size_t projection_workspace_bytes(int in, Isa isa, int threads);
void project(const ProjectionParams& params, Isa isa, int threads, void* workspace, std::size_t workspace_bytes);

}  // namespace attnbatch::kernels
