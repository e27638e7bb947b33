// AVX2 + FMA backend: 16 ymm registers hold a 6 x 16 accumulator tile, two key/value vectors
// and one broadcast; 12 independent FMA chains cover the FMA latency. x86 only.
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "blocked_avx2.cpp is compiled with -mavx2 -mfma -mf16c (src/kernels/CMakeLists.txt)"
#endif
#define ATTNBATCH_ISA_NAMESPACE isa_avx2
#define ATTNBATCH_VECTOR_BYTES 32
#define ATTNBATCH_MR 6
#define ATTNBATCH_NV 2
#include "blocked_backend.hpp"

namespace attnbatch::kernels {

namespace {

// Feature tests only (no vector code), so it runs on CPUs without AVX2.
bool cpu_has_avx2() {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

}  // namespace

extern const Backend avx2_backend = isa_avx2::blocked_backend("avx2", cpu_has_avx2, {48, 256});

}  // namespace attnbatch::kernels
