// Chooses the kernel and instruction set at run time, checks preconditions and workspace.
#include <stdexcept>
#include <string>

#include "attnbatch/kernels/attention.hpp"
#include "blocked_kernel.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace attnbatch::kernels {

std::size_t reference_workspace_bytes(const AttentionParams& p, int threads);
void reference_forward(const AttentionParams& p, int threads, void* workspace);

namespace {

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
    return false;
#endif
}

bool cpu_has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
#else
    return false;
#endif
}

int resolve_threads(int threads) {
    if (threads > 0) return threads;
#if defined(_OPENMP)
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// Tile sizes measured with `attnbatch bench` (see README, "Kernel tuning").
struct Tiles {
    int block_q, block_k;
};

Tiles default_tiles(Isa isa) {
    switch (isa) {
        // Long key tiles: the per-row softmax bookkeeping (row max, rescale, sums) is paid once
        // per key tile, and a row block's 12 x 512 S strip (24 KiB) still sits in L1.
        case Isa::avx512: return {96, 512};
        case Isa::avx2: return {48, 256};
        default: return {48, 128};
    }
}

Tiles choose_tiles(Isa isa, const KernelOptions& o) {
    Tiles t = default_tiles(isa);
    if (o.block_q > 0) t.block_q = o.block_q;
    if (o.block_k > 0) t.block_k = o.block_k;
    return t;
}

}  // namespace

bool isa_available(Isa isa) {
    switch (isa) {
        case Isa::best:
        case Isa::portable: return true;
        case Isa::avx2: return isa_avx2::geometry().lanes > 0 && cpu_has_avx2();
        case Isa::avx512: return isa_avx512::geometry().lanes > 0 && cpu_has_avx512();
    }
    return false;
}

Isa resolve_isa(Isa isa) {
    if (isa != Isa::best) return isa;
    if (isa_available(Isa::avx512)) return Isa::avx512;
    if (isa_available(Isa::avx2)) return Isa::avx2;
    return Isa::portable;
}

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::best: return "best";
        case Isa::portable: return "portable";
        case Isa::avx2: return "avx2";
        case Isa::avx512: return "avx512";
    }
    return "?";
}

std::size_t attention_workspace_bytes(const AttentionParams& p, const KernelOptions& o) {
    const int threads = resolve_threads(o.threads);
    if (o.kind == KernelKind::reference) return reference_workspace_bytes(p, threads);
    const Isa isa = resolve_isa(o.isa);
    const Tiles t = choose_tiles(isa, o);
    switch (isa) {
        case Isa::avx512: return isa_avx512::workspace_bytes(p, t.block_q, t.block_k, threads);
        case Isa::avx2: return isa_avx2::workspace_bytes(p, t.block_q, t.block_k, threads);
        default: return isa_portable::workspace_bytes(p, t.block_q, t.block_k, threads);
    }
}

void attention_forward(const AttentionParams& p, const KernelOptions& o, void* workspace,
                       std::size_t workspace_bytes) {
    const std::string problem = check_attention_params(p);
    if (!problem.empty()) throw std::invalid_argument(problem);
    if (!isa_available(o.isa)) {
        throw std::invalid_argument(std::string("attention kernel: instruction set ") + isa_name(o.isa) +
                                    " is not available on this CPU or in this build");
    }
    const std::size_t needed = attention_workspace_bytes(p, o);
    if (workspace_bytes < needed || (needed > 0 && workspace == nullptr)) {
        throw std::invalid_argument("attention kernel: workspace of " + std::to_string(workspace_bytes) +
                                    " bytes is too small, expected at least " + std::to_string(needed));
    }
    if (p.batch == 0) return;
    const int threads = resolve_threads(o.threads);
    if (o.kind == KernelKind::reference) {
        reference_forward(p, threads, workspace);
        return;
    }
    const Isa isa = resolve_isa(o.isa);
    const Tiles t = choose_tiles(isa, o);
    switch (isa) {
        case Isa::avx512: isa_avx512::forward(p, t.block_q, t.block_k, threads, workspace); break;
        case Isa::avx2: isa_avx2::forward(p, t.block_q, t.block_k, threads, workspace); break;
        default: isa_portable::forward(p, t.block_q, t.block_k, threads, workspace); break;
    }
}

}  // namespace attnbatch::kernels
