// Projections Y = X W + b (row-vector convention, W stored [in, out]) on the attention kernel's
// register-blocked micro-kernel, over any set of rows: spans of consecutive rows of X, each
// written to consecutive rows of Y. Every row is computed on its own by one thread in a fixed
// order, so its bits do not depend on the thread count, on the span it came in or on the other
// rows of the call. Threads share the work span by span: split long runs of rows into spans of
// some tens of rows to spread them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attnbatch/kernels/attention.hpp"

namespace attnbatch::kernels {

// W packed into column panels for one instruction set; the caller owns the memory.
std::size_t projection_packed_floats(int in, int out, Isa isa);
void pack_projection_weights(const float* w, int in, int out, float* packed, Isa isa);

// `rows` rows of X from x on, written from y on.
struct ProjectionSpan {
    const float* x = nullptr;
    float* y = nullptr;
    std::int32_t rows = 0;
};

struct ProjectionParams {
    const ProjectionSpan* spans = nullptr;
    std::size_t span_count = 0;
    std::ptrdiff_t x_row_stride = 0, y_row_stride = 0;  // within every span; last axis contiguous
    int in = 0, out = 0;
    const float* packed_w = nullptr;  // from pack_projection_weights with the same isa
    const float* bias = nullptr;      // (out) or null
};

std::size_t projection_workspace_bytes(int in, Isa isa, int threads);
// Throws std::invalid_argument on non-positive sizes, null pointers, row strides shorter than a
// row or a workspace below projection_workspace_bytes.
void project(const ProjectionParams& params, Isa isa, int threads, void* workspace, std::size_t workspace_bytes);

}  // namespace attnbatch::kernels
