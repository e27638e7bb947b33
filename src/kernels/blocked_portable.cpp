// Portable backend: 16-byte vectors, which every x86-64 (SSE2) and AArch64 (NEON) CPU has.
// Built for every target; the fallback of `best`.
#define ATTNBATCH_ISA_NAMESPACE isa_portable
#define ATTNBATCH_VECTOR_BYTES 16
#define ATTNBATCH_MR 6
#define ATTNBATCH_NV 2
#include "blocked_backend.hpp"

namespace attnbatch::kernels {

namespace {

bool runs_everywhere() { return true; }

}  // namespace

extern const Backend portable_backend = isa_portable::blocked_backend("portable", runs_everywhere, {48, 128});

}  // namespace attnbatch::kernels
