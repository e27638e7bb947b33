// AVX-512 backend: 32 zmm registers hold a 12 x 32 accumulator tile (24 FMA chains), two
// vectors of keys or values and one broadcast. x86 only.
#if !defined(__AVX512F__) || !defined(__AVX512VL__) || !defined(__AVX512BW__) || !defined(__AVX512DQ__)
#error "blocked_avx512.cpp is compiled with -mavx512f -mavx512vl -mavx512bw -mavx512dq (src/kernels/CMakeLists.txt)"
#endif
#define ATTNBATCH_ISA_NAMESPACE isa_avx512
#define ATTNBATCH_VECTOR_BYTES 64
#define ATTNBATCH_MR 12
#define ATTNBATCH_NV 2
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

// Long key tiles: the per-row softmax bookkeeping (row max, rescale, sums) is paid once per key
// tile, and a row block's 12 x 512 S strip (24 KiB) still sits in L1.
extern const Backend avx512_backend = isa_avx512::blocked_backend("avx512", cpu_has_avx512, {96, 512});

}  // namespace attnbatch::kernels
