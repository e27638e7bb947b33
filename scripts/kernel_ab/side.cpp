// One side of kernel_ab.sh: its attention kernel behind plain functions, through the public
// entry points (attention.hpp) that `run` and `bench` call, so that the side picks its backend
// as they do. Compiled once per side with that side's headers and -Dattnbatch=attnbatch_<side>,
// so that the two copies of every kernel symbol live in namespaces of their own and link into
// one program.
#include <cstddef>
#include <exception>

#include "attnbatch/kernels/attention.hpp"
#include "problem.hpp"

namespace {

namespace k = attnbatch::kernels;

k::AttentionParams params_of(const AbProblem& problem, bool causal) {
    k::AttentionParams p;
    const std::ptrdiff_t row = problem.dim, head = static_cast<std::ptrdiff_t>(problem.len) * row;
    const k::TensorStrides strides{head * problem.heads, head, row};
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

// The best blocked backend of the precision on this CPU, as `bench --precision` picks it.
k::KernelOptions options_of(const AbProblem& problem, int kernel) {
    k::KernelOptions o;
    o.precision = kernel == ab_bf16 ? k::Precision::bf16 : k::Precision::fp32;
    o.threads = problem.threads;
    return o;
}

}  // namespace

#define AB_JOIN2(a, b) a##b
#define AB_JOIN(a, b) AB_JOIN2(a, b)

extern "C" std::size_t AB_JOIN(AB_SIDE, _workspace_bytes)(const AbProblem* problem, int kernel, int causal) {
    return k::attention_workspace_bytes(params_of(*problem, causal != 0), options_of(*problem, kernel));
}

extern "C" void AB_JOIN(AB_SIDE, _forward)(const AbProblem* problem, int kernel, int causal, void* workspace,
                                           std::size_t workspace_bytes) {
    k::attention_forward(params_of(*problem, causal != 0), options_of(*problem, kernel), workspace, workspace_bytes);
}

// Whether this side runs `kernel` on this CPU: its dispatch refuses a precision that no backend
// the CPU runs can do, as it refuses `bench --precision bf16` there.
extern "C" int AB_JOIN(AB_SIDE, _runs)(const AbProblem* problem, int kernel) {
    try {
        (void)k::attention_workspace_bytes(params_of(*problem, false), options_of(*problem, kernel));
        return 1;
    } catch (const std::exception&) {
        return 0;
    }
}
