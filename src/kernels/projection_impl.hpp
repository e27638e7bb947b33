// Projection GEMM on the blocked kernel's micro-kernel (micro_qk computes an MR x NR tile of
// A B from row-major A and B packed in NR-column panels). Compiled into each blocked backend's
// own namespace (see blocked_backend.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnbatch/kernels/projection.hpp"
#include "blocked_workspace.hpp"
#include "micro_kernels.hpp"

namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE {

std::size_t projection_packed_floats(int in, int out) {
    return round_up(static_cast<std::size_t>(out), kNR) * static_cast<std::size_t>(in);
}

void pack_projection_weights(const float* w, int in, int out, float* packed) {
    const int panels = (out + kNR - 1) / kNR;
    for (int panel = 0; panel < panels; ++panel) {
        float* dst = packed + static_cast<std::size_t>(panel) * in * kNR;
        for (int r = 0; r < in; ++r) {
            for (int lane = 0; lane < kNR; ++lane) {
                const int c = panel * kNR + lane;
                dst[r * kNR + lane] = c < out ? w[static_cast<std::size_t>(r) * out + c] : 0.0f;
            }
        }
    }
}

std::size_t projection_workspace_bytes(int in, int threads) {
    const std::size_t per_thread = floats(static_cast<std::size_t>(kMR) * in) + floats(static_cast<std::size_t>(kMR) * kNR);
    return per_thread * static_cast<std::size_t>(threads) + kAlign;
}

namespace {

// One span, panel by panel: a panel of W (in x NR) stays in L1/L2 while the span's row blocks
// pass under it, so W is read from memory once per span rather than once per row block. Each
// element is the same chain of FMAs over the whole depth, then + bias, whatever the order.
// A last partial row block is copied zero-padded into `tail` first; whole tiles are stored
// straight into Y, partial ones through `tile`.
void project_span(const ProjectionParams& p, const ProjectionSpan& span, float* tail, float* tile) {
    const int rows = span.rows;
    const int whole_blocks = rows / kMR, tail_rows = rows - whole_blocks * kMR;
    const std::ptrdiff_t ldx = p.x_row_stride, ldy = p.y_row_stride;
    if (tail_rows > 0) {
        for (int m = 0; m < kMR; ++m) {
            float* dst = tail + static_cast<std::size_t>(m) * p.in;
            if (m < tail_rows) std::memcpy(dst, span.x + (whole_blocks * kMR + m) * ldx, sizeof(float) * p.in);
            else std::memset(dst, 0, sizeof(float) * p.in);
        }
    }
    const int panels = (p.out + kNR - 1) / kNR;
    for (int panel = 0; panel < panels; ++panel) {
        const float* w = p.packed_w + static_cast<std::size_t>(panel) * p.in * kNR;
        const int c0 = panel * kNR;
        const int width = imin(kNR, p.out - c0);
        const float* bias = p.bias ? p.bias + c0 : nullptr;
        for (int blk = 0; blk <= whole_blocks; ++blk) {
            const int block_rows = blk < whole_blocks ? kMR : tail_rows;
            if (block_rows == 0) break;
            float* y = span.y + blk * kMR * ldy + c0;
            if (block_rows == kMR && width == kNR) {
                micro_qk(span.x + blk * kMR * ldx, ldx, w, p.in, y, static_cast<int>(ldy));
                if (bias) {
                    for (int m = 0; m < kMR; ++m) {
                        float* yrow = y + m * ldy;
                        for (int c = 0; c < kNR; ++c) yrow[c] += bias[c];
                    }
                }
                continue;
            }
            const float* a = block_rows == kMR ? span.x + blk * kMR * ldx : tail;
            const std::ptrdiff_t lda = block_rows == kMR ? ldx : p.in;
            micro_qk(a, lda, w, p.in, tile, kNR);
            for (int m = 0; m < block_rows; ++m) {
                float* yrow = y + m * ldy;
                const float* t = tile + m * kNR;
                if (bias) {
                    for (int c = 0; c < width; ++c) yrow[c] = t[c] + bias[c];
                } else {
                    for (int c = 0; c < width; ++c) yrow[c] = t[c];
                }
            }
        }
    }
}

}  // namespace

void project(const ProjectionParams& p, int threads, void* workspace) {
    char* base = reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(workspace), kAlign));
    const std::size_t tail_bytes = floats(static_cast<std::size_t>(kMR) * p.in);
    const std::size_t per_thread = tail_bytes + floats(static_cast<std::size_t>(kMR) * kNR);
    const auto spans = static_cast<long>(p.span_count);
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (spans > 1)
#endif
    for (long s = 0; s < spans; ++s) {
#if defined(_OPENMP)
        char* mine = base + per_thread * static_cast<std::size_t>(omp_get_thread_num());
#else
        (void)threads;
        char* mine = base;
#endif
        if (p.spans[s].rows > 0) {
            project_span(p, p.spans[s], reinterpret_cast<float*>(mine), reinterpret_cast<float*>(mine + tail_bytes));
        }
    }
}

}  // namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE
