// Chooses the kernel and its backend at run time, checks preconditions and workspace.
#include <stdexcept>
#include <string>

#include "attnbatch/kernels/attention.hpp"
#include "attnbatch/kernels/threads.hpp"
#include "backend.hpp"


namespace attnbatch::kernels {

std::size_t reference_workspace_bytes(const AttentionParams& p, int threads);
void reference_forward(const AttentionParams& p, int threads, void* workspace);

namespace {

Tiles choose_tiles(const Backend& backend, const KernelOptions& o) {
    Tiles t = backend.default_tiles;
    if (o.block_q > 0) t.block_q = o.block_q;
    if (o.block_k > 0) t.block_k = o.block_k;
    return t;
}

}  // namespace

std::size_t attention_workspace_bytes(const AttentionParams& p, const KernelOptions& o) {
    const int threads = resolved_threads(o.threads);
    if (o.kind == KernelKind::reference) return reference_workspace_bytes(p, threads);
    // The backend's own code sizes its workspace, so the CPU must run it here already.
    const Backend& backend = usable_backend(o.isa, "attention kernel", o.precision);
    const Tiles t = choose_tiles(backend, o);
    return backend.workspace_bytes(p, t.block_q, t.block_k, threads);
}

std::string matrix_unit(const KernelOptions& o) {
    if (o.kind == KernelKind::reference) return "fp64-reference";
    const Backend& backend = usable_backend(o.isa, "attention kernel", o.precision);
    return backend.matrix_unit ? backend.matrix_unit(o.amx_permitted) : backend.name;
}

int row_block(const KernelOptions& o) {
    if (o.kind == KernelKind::reference) return 0;
    const Backend& backend = usable_backend(o.isa, "attention kernel", o.precision);
    return backend.row_block ? backend.row_block() : 0;
}

void attention_forward(const AttentionParams& p, const KernelOptions& o, void* workspace,
                       std::size_t workspace_bytes) {
    const std::string problem = check_attention_params(p);
    if (!problem.empty()) throw std::invalid_argument(problem);
    const std::size_t needed = attention_workspace_bytes(p, o);  // checks the isa and precision too
    if (workspace_bytes < needed || (needed > 0 && workspace == nullptr)) {
        throw std::invalid_argument("attention kernel: workspace of " + std::to_string(workspace_bytes) +
                                    " bytes is too small, expected at least " + std::to_string(needed));
    }
    if (p.batch == 0) return;
    const int threads = resolved_threads(o.threads);
    if (o.kind == KernelKind::reference) {
        reference_forward(p, threads, workspace);
        return;
    }
    const Backend& backend = usable_backend(o.isa, "attention kernel", o.precision);
    const Tiles t = choose_tiles(backend, o);
    backend.forward(p, t.block_q, t.block_k, threads, o.amx_permitted, workspace);
}

}  // namespace attnbatch::kernels
