// Baseline build of the blocked kernel: 16-byte vectors, which every x86-64 (SSE2) and
// AArch64 (NEON) CPU has.
#define ATTNBATCH_ISA_NAMESPACE isa_portable
#define ATTNBATCH_VECTOR_BYTES 16
#define ATTNBATCH_MR 6
#define ATTNBATCH_NV 2
#include "blocked_attention.hpp"
#include "projection_impl.hpp"
