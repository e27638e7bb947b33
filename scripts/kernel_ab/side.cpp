// One side of kernel_ab.sh: its attention kernels behind plain functions. Compiled once per
// side with that side's headers and -Dattnbatch=attnbatch_<side>, so that the two copies of
// every kernel symbol live in namespaces of their own and link into one program.
#include <cstddef>

#include "attnbatch/kernels/attention.hpp"
#include "backend.hpp"
#include "problem.hpp"

namespace attnbatch::kernels {
extern const Backend avx2_backend;
extern const Backend avx512_backend;
extern const Backend avx512_bf16_backend;
}  // namespace attnbatch::kernels

namespace {

using attnbatch::kernels::AttentionParams;
using attnbatch::kernels::Backend;

// AVX-512 where the CPU has it, else AVX2 (fp32 only: bf16 needs AVX512-BF16).
const Backend& backend_for(int kernel) {
    if (kernel == ab_bf16) return attnbatch::kernels::avx512_bf16_backend;
    return attnbatch::kernels::avx512_backend.cpu_supports() ? attnbatch::kernels::avx512_backend
                                                               : attnbatch::kernels::avx2_backend;
}

AttentionParams params_of(const AbProblem& problem, bool causal) {
    AttentionParams p;
    const std::ptrdiff_t row = problem.dim, head = static_cast<std::ptrdiff_t>(problem.len) * row;
    const attnbatch::kernels::TensorStrides strides{head * problem.heads, head, row};
    p.q = problem.q;
    p.k = problem.k;
    p.v = problem.v;
    p.out = problem.out;
    p.lse = problem.lse;
    p.q_strides = p.k_strides = p.v_strides = p.out_strides = strides;
    p.batch = problem.batch;
    p.heads = problem.heads;
    p.len_q = p.len_k = problem.len;
    p.dim_k = p.dim_v = problem.dim;
    p.scale = 1.0f / __builtin_sqrtf(static_cast<float>(problem.dim));
    p.causal = causal;
    return p;
}

}  // namespace

#define AB_JOIN2(a, b) a##b
#define AB_JOIN(a, b) AB_JOIN2(a, b)

extern "C" std::size_t AB_JOIN(AB_SIDE, _workspace_bytes)(const AbProblem* problem, int kernel, int causal) {
    const Backend& backend = backend_for(kernel);
    return backend.workspace_bytes(params_of(*problem, causal != 0), backend.default_tiles.block_q,
                                   backend.default_tiles.block_k, problem->threads);
}

extern "C" void AB_JOIN(AB_SIDE, _forward)(const AbProblem* problem, int kernel, int causal, void* workspace) {
    const Backend& backend = backend_for(kernel);
    backend.forward(params_of(*problem, causal != 0), backend.default_tiles.block_q, backend.default_tiles.block_k,
                    problem->threads, false, workspace);
}
