// AVX2 + FMA: 16 ymm registers hold a 6 x 16 accumulator tile, two key/value vectors and one
// broadcast; 12 independent FMA chains cover the FMA latency.
#if defined(__AVX2__) && defined(__FMA__)
#define ATTNBATCH_ISA_NAMESPACE isa_avx2
#define ATTNBATCH_VECTOR_BYTES 32
#define ATTNBATCH_MR 6
#define ATTNBATCH_NV 2
#include "blocked_attention.hpp"
#include "projection_impl.hpp"
#else
#include <stdexcept>
#include "blocked_kernel.hpp"
namespace attnbatch::kernels::isa_avx2 {
BlockedGeometry geometry() { return {0, 0, 0}; }
std::size_t workspace_bytes(const AttentionParams&, int, int, int) { return 0; }
void forward(const AttentionParams&, int, int, int, void*) { throw std::logic_error("AVX2 kernel not built"); }
std::size_t projection_packed_floats(int, int) { return 0; }
void pack_projection_weights(const float*, int, int, float*) { throw std::logic_error("AVX2 kernel not built"); }
std::size_t projection_workspace_bytes(int, int) { return 0; }
void project(const ProjectionParams&, int, void*) { throw std::logic_error("AVX2 kernel not built"); }
}  // namespace attnbatch::kernels::isa_avx2
#endif
