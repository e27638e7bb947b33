// bf16 backend: attention with Q, K, V and P rounded to bfloat16 and fp32 accumulation
// (bf16_products.hpp) on AMX tiles where the CPU has them and the OS granted them
// (KernelOptions::amx_permitted), else on AVX512-BF16 dot products; softmax in fp32 with the
// AVX-512 code of the fp32 backend. Projections in fp32, the AVX-512 ones. x86 only.
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512BF16__) || !defined(__AMX_BF16__)
#error "blocked_avx512_bf16.cpp is compiled with -mavx512f -mavx512bw -mavx512bf16 -mamx-tile -mamx-bf16 (src/kernels/CMakeLists.txt)"
#endif
#define ATTNBATCH_ISA_NAMESPACE isa_avx512_bf16
#define ATTNBATCH_VECTOR_BYTES 64
#define ATTNBATCH_MR 16
#define ATTNBATCH_NV 2
#define ATTNBATCH_NV_PV 1
#include "backend.hpp"
#include "bf16_products.hpp"
#include "blocked_attention.hpp"
#include "projection_impl.hpp"

namespace attnbatch::kernels {

namespace {

// Feature tests only (no vector code), so it runs on CPUs without AVX-512.
bool cpu_has_avx512_bf16() {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
           __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bf16");
}

const char* products_on(bool amx_permitted) {
    return isa_avx512_bf16::matrix_tiles_usable(amx_permitted) ? "amx-bf16" : "avx512-bf16";
}

}  // namespace

extern const Backend avx512_bf16_backend{"avx512_bf16",
                                         cpu_has_avx512_bf16,
                                         {128, 512},
                                         Precision::bf16,
                                         products_on,
                                         nullptr,
                                         isa_avx512_bf16::workspace_bytes,
                                         isa_avx512_bf16::forward,
                                         isa_avx512_bf16::projection_packed_floats,
                                         isa_avx512_bf16::pack_projection_weights,
                                         isa_avx512_bf16::projection_workspace_bytes,
                                         isa_avx512_bf16::project};

}  // namespace attnbatch::kernels
