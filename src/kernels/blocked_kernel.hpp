// Entry points of the blocked kernel, one namespace per instruction set (see blocked_impl.hpp).
#pragma once

#include <cstddef>

#include "attnbatch/kernels/attention.hpp"
#include "attnbatch/kernels/projection.hpp"

namespace attnbatch::kernels {

struct BlockedGeometry {
    int rows_per_microtile;     // MR: query tiles are multiples of it
    int columns_per_microtile;  // NR: key tiles are multiples of it
    int lanes;
};

#define ATTNBATCH_DECLARE_BLOCKED(ns)                                                              \
    namespace ns {                                                                                 \
    BlockedGeometry geometry();                                                                    \
    std::size_t workspace_bytes(const AttentionParams& p, int block_q, int block_k, int threads); \
    void forward(const AttentionParams& p, int block_q, int block_k, int threads, void* workspace); \
    std::size_t projection_packed_floats(int in, int out);                                       \
    void pack_projection_weights(const float* w, int in, int out, float* packed);                \
    std::size_t projection_workspace_bytes(int in, int threads);                                 \
    void project(const ProjectionParams& p, int threads, void* workspace);                       \
    }

ATTNBATCH_DECLARE_BLOCKED(isa_portable)
ATTNBATCH_DECLARE_BLOCKED(isa_avx2)
ATTNBATCH_DECLARE_BLOCKED(isa_avx512)

#undef ATTNBATCH_DECLARE_BLOCKED

}  // namespace attnbatch::kernels
