// AVX-512 backend: an 8 x 32 accumulator tile (16 FMA chains) in the 32 zmm registers, two
// vectors of keys or values and the broadcasts. 16 chains cover the FMA latency, and on the
// AMD Zen 5 of docs/performance.md 8-row blocks ran fp32 1.6-3% faster than 12-row ones (which
// filled 24 of the registers), causal 2.5-6% (blocked_attention.hpp, version 18): the causal
// diagonal wastes less in blocks of 8; why full runs gain too was not isolated. Intel cores
// run the 12-row build of blocked_avx512_rows12.cpp instead (avx512_row_block, isa.hpp), with
// the same bits. x86 only.
#if !defined(__AVX512F__) || !defined(__AVX512VL__) || !defined(__AVX512BW__) || !defined(__AVX512DQ__)
#error "blocked_avx512.cpp is compiled with -mavx512f -mavx512vl -mavx512bw -mavx512dq (src/kernels/CMakeLists.txt)"
#endif
#define ATTNBATCH_ISA_NAMESPACE isa_avx512
#define ATTNBATCH_VECTOR_BYTES 64
#define ATTNBATCH_MR 8
#define ATTNBATCH_NV 2
#include "attnbatch/kernels/isa.hpp"
#include "blocked_backend.hpp"

namespace attnbatch::kernels {

namespace {

// Feature tests only (no vector code), so it runs on CPUs without AVX-512.
bool cpu_has_avx512() {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
           __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
}

}  // namespace

extern const Backend avx512_rows12_attention;  // blocked_avx512_rows12.cpp

namespace {

// Enough for either row block, so that a workspace sized before set_avx512_row_block changes
// the choice still fits the call after it.
std::size_t avx512_workspace_bytes(const AttentionParams& p, int block_q, int block_k, int threads) {
    const std::size_t twelve = avx512_rows12_attention.workspace_bytes(p, block_q, block_k, threads);
    const std::size_t eight = isa_avx512::workspace_bytes(p, block_q, block_k, threads);
    return twelve > eight ? twelve : eight;
}

void avx512_forward(const AttentionParams& p, int block_q, int block_k, int threads, bool amx_permitted,
                    void* workspace) {
    if (avx512_row_block() == 12) {
        avx512_rows12_attention.forward(p, block_q, block_k, threads, amx_permitted, workspace);
        return;
    }
    isa_avx512::forward(p, block_q, block_k, threads, amx_permitted, workspace);
}

}  // namespace

// Long key tiles: the per-row softmax bookkeeping (row max, rescale, sums) is paid once per key
// tile, and a row block's 8 x 512 S strip (16 KiB) still sits in L1. Query tiles of 128 rows
// (16 row blocks) ran 0.3-0.9% faster than 64 or 256 and about 1% faster than 96; with 12-row
// blocks, 128 rows (rounded up to 132) and 96 ran alike on the Intel Xeon.
extern const Backend avx512_backend{"avx512",
                                    cpu_has_avx512,
                                    {128, 512},
                                    Precision::fp32,
                                    nullptr,
                                    avx512_row_block,
                                    avx512_workspace_bytes,
                                    avx512_forward,
                                    isa_avx512::projection_packed_floats,
                                    isa_avx512::pack_projection_weights,
                                    isa_avx512::projection_workspace_bytes,
                                    isa_avx512::project};

}  // namespace attnbatch::kernels
