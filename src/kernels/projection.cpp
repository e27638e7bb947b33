// Run-time choice of backend for the projections (see projection.hpp).
#include "attnbatch/kernels/projection.hpp"

#include <stdexcept>

#include "backend.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace attnbatch::kernels {

namespace {

int resolve_threads(int threads) {
#if defined(_OPENMP)
    return threads > 0 ? threads : omp_get_max_threads();
#else
    (void)threads;
    return 1;
#endif
}

}  // namespace

std::size_t projection_packed_floats(int in, int out, Isa isa) {
    return usable_backend(isa, "projection", isa_precision(isa)).projection_packed_floats(in, out);
}

void pack_projection_weights(const float* w, int in, int out, float* packed, Isa isa) {
    usable_backend(isa, "projection", isa_precision(isa)).pack_projection_weights(w, in, out, packed);
}

std::size_t projection_workspace_bytes(int in, Isa isa, int threads) {
    return usable_backend(isa, "projection", isa_precision(isa)).projection_workspace_bytes(in, resolve_threads(threads));
}

void project(const ProjectionParams& p, Isa isa, int threads, void* workspace, std::size_t workspace_bytes) {
    if (p.batch < 0 || p.len < 1 || p.in < 1 || p.out < 1 || !p.x || !p.y || !p.packed_w) {
        throw std::invalid_argument("projection: sizes must be positive and x, y, packed_w non-null");
    }
    if (p.x_row_stride < p.in || p.y_row_stride < p.out) {
        throw std::invalid_argument("projection: row strides must cover a row");
    }
    if (workspace_bytes < projection_workspace_bytes(p.in, isa, threads)) {
        throw std::invalid_argument("projection: workspace too small");
    }
    usable_backend(isa, "projection", isa_precision(isa)).project(p, resolve_threads(threads), workspace);
}

}  // namespace attnbatch::kernels
