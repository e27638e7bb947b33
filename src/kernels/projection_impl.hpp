// Projection GEMM per sequence on the blocked kernel's micro-kernel (micro_qk computes an
// MR x NR tile of A B from row-major A and B packed in NR-column panels). Compiled into each
// blocked backend's own namespace (see blocked_backend.hpp).
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

// Rows [0, rows) of one sequence: row blocks of MR, the last one zero-padded in `tail`.
void project_sequence(const ProjectionParams& p, int b, float* tail, float* tile) {
    const float* x = p.x + b * p.x_seq_stride;
    float* y = p.y + b * p.y_seq_stride;
    const int rows = p.lengths ? imin(imax(p.lengths[b], 0), p.len) : p.len;
    const int panels = (p.out + kNR - 1) / kNR;
    for (int r0 = 0; r0 < rows; r0 += kMR) {
        const int block_rows = imin(kMR, rows - r0);
        const float* a = x + r0 * p.x_row_stride;
        int lda = static_cast<int>(p.x_row_stride);
        if (block_rows < kMR) {
            for (int m = 0; m < kMR; ++m) {
                float* dst = tail + static_cast<std::size_t>(m) * p.in;
                if (m < block_rows) {
                    std::memcpy(dst, x + (r0 + m) * p.x_row_stride, sizeof(float) * p.in);
                } else {
                    std::memset(dst, 0, sizeof(float) * p.in);
                }
            }
            a = tail;
            lda = p.in;
        }
        for (int panel = 0; panel < panels; ++panel) {
            micro_qk(a, lda, p.packed_w + static_cast<std::size_t>(panel) * p.in * kNR, p.in, tile, kNR);
            const int c0 = panel * kNR;
            const int width = imin(kNR, p.out - c0);
            for (int m = 0; m < block_rows; ++m) {
                float* yrow = y + (r0 + m) * p.y_row_stride + c0;
                const float* t = tile + m * kNR;
                if (p.bias) {
                    for (int c = 0; c < width; ++c) yrow[c] = t[c] + p.bias[c0 + c];
                } else {
                    for (int c = 0; c < width; ++c) yrow[c] = t[c];
                }
            }
        }
    }
    for (int r = rows; r < p.len; ++r) std::memset(y + r * p.y_row_stride, 0, sizeof(float) * p.out);
}

}  // namespace

void project(const ProjectionParams& p, int threads, void* workspace) {
    char* base = reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(workspace), kAlign));
    const std::size_t tail_bytes = floats(static_cast<std::size_t>(kMR) * p.in);
    const std::size_t per_thread = tail_bytes + floats(static_cast<std::size_t>(kMR) * kNR);
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
#endif
    for (int b = 0; b < p.batch; ++b) {
#if defined(_OPENMP)
        char* mine = base + per_thread * static_cast<std::size_t>(omp_get_thread_num());
#else
        (void)threads;
        char* mine = base;
#endif
        project_sequence(p, b, reinterpret_cast<float*>(mine), reinterpret_cast<float*>(mine + tail_bytes));
    }
}

}  // namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE
