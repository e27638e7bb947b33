// The AVX-512 fp32 kernel again, on 12 x 32 accumulator tiles (24 FMA chains) instead of
// blocked_avx512.cpp's 8 x 32: the row-block height is the one choice of that kernel that
// suits the two kinds of core measured apart. Each micro-tile step loads two vectors of keys
// (or values), streamed from L2; 12 rows spend those loads on 24 FMAs instead of 16, which the
// Intel Xeon of 2026-12-07 (AMX, 4 MiB of L2 per core) ran 5% faster full and 2% causal
// (docs/performance-log.md, "An Intel Xeon again (2026-12-07, from 19:13)"), while the AMD
// Zen 5 ran 8-row blocks 1.6-3% faster. blocked_avx512.cpp picks one per CPU
// (avx512_row_block); both compute every element by the same operations in the same order,
// so their outputs, lse and weights are the same bits. Attention only: the projections stay
// those of blocked_avx512.cpp (12 rows did not speed them up).
#if !defined(__AVX512F__) || !defined(__AVX512VL__) || !defined(__AVX512BW__) || !defined(__AVX512DQ__)
#error "blocked_avx512_rows12.cpp is compiled with -mavx512f -mavx512vl -mavx512bw -mavx512dq (src/kernels/CMakeLists.txt)"
#endif
#define ATTNBATCH_ISA_NAMESPACE isa_avx512_rows12
#define ATTNBATCH_VECTOR_BYTES 64
#define ATTNBATCH_MR 12
#define ATTNBATCH_NV 2
#include "blocked_backend.hpp"

namespace attnbatch::kernels {

// Its name and CPU test are blocked_avx512.cpp's: it runs only as that backend's attention.
extern const Backend avx512_rows12_attention = isa_avx512_rows12::blocked_backend("avx512", nullptr, {128, 512});

}  // namespace attnbatch::kernels
