// Run-time choice of backend for the projections (see projection.hpp).
#include "attnbatch/kernels/projection.hpp"
#include "attnbatch/kernels/threads.hpp"

#include <stdexcept>
#include <string>

#include "backend.hpp"


namespace attnbatch::kernels {

std::size_t projection_packed_floats(int in, int out, Isa isa) {
    return usable_backend(isa, "projection", isa_precision(isa)).projection_packed_floats(in, out);
}

void pack_projection_weights(const float* w, int in, int out, float* packed, Isa isa) {
    usable_backend(isa, "projection", isa_precision(isa)).pack_projection_weights(w, in, out, packed);
}

std::size_t projection_workspace_bytes(int in, Isa isa, int threads) {
    return usable_backend(isa, "projection", isa_precision(isa)).projection_workspace_bytes(in, resolved_threads(threads));
}

void project(const ProjectionParams& p, Isa isa, int threads, void* workspace, std::size_t workspace_bytes) {
    if (p.in < 1 || p.out < 1 || !p.packed_w || (p.span_count > 0 && !p.spans)) {
        throw std::invalid_argument("projection: sizes must be positive and packed_w, spans non-null");
    }
    if (p.x_row_stride < p.in || p.y_row_stride < p.out) {
        throw std::invalid_argument("projection: row strides must cover a row");
    }
    for (std::size_t s = 0; s < p.span_count; ++s) {
        if (p.spans[s].rows < 0 || (p.spans[s].rows > 0 && (!p.spans[s].x || !p.spans[s].y))) {
            throw std::invalid_argument("projection: span " + std::to_string(s) + " has negative rows or a null pointer");
        }
    }
    if (workspace_bytes < projection_workspace_bytes(p.in, isa, threads)) {
        throw std::invalid_argument("projection: workspace too small");
    }
    usable_backend(isa, "projection", isa_precision(isa)).project(p, resolved_threads(threads), workspace);
}

}  // namespace attnbatch::kernels
