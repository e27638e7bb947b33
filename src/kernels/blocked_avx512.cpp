// AVX-512: 32 zmm registers hold a 12 x 32 accumulator tile (24 FMA chains), two vectors of
// keys or values and one broadcast.
#if defined(__AVX512F__)
#define ATTNBATCH_ISA_NAMESPACE isa_avx512
#define ATTNBATCH_VECTOR_BYTES 64
#define ATTNBATCH_MR 12
#define ATTNBATCH_NV 2
#include "blocked_attention.hpp"
#include "projection_impl.hpp"
#else
#include <stdexcept>
#include "blocked_kernel.hpp"
namespace attnbatch::kernels::isa_avx512 {
BlockedGeometry geometry() { return {0, 0, 0}; }
std::size_t workspace_bytes(const AttentionParams&, int, int, int) { return 0; }
void forward(const AttentionParams&, int, int, int, void*) { throw std::logic_error("AVX-512 kernel not built"); }
std::size_t projection_packed_floats(int, int) { return 0; }
void pack_projection_weights(const float*, int, int, float*) { throw std::logic_error("AVX-512 kernel not built"); }
std::size_t projection_workspace_bytes(int, int) { return 0; }
void project(const ProjectionParams&, int, void*) { throw std::logic_error("AVX-512 kernel not built"); }
}  // namespace attnbatch::kernels::isa_avx512
#endif
