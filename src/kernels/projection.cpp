// Run-time choice of instruction set for the projections (see projection.hpp).
#include "attnbatch/kernels/projection.hpp"

#include <stdexcept>
#include <string>

#include "blocked_kernel.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace attnbatch::kernels {

namespace {

Isa usable(Isa isa) {
    if (!isa_available(isa)) {
        throw std::invalid_argument(std::string("projection: instruction set ") + isa_name(isa) + " is not available");
    }
    return resolve_isa(isa);
}

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
    switch (usable(isa)) {
        case Isa::avx512: return isa_avx512::projection_packed_floats(in, out);
        case Isa::avx2: return isa_avx2::projection_packed_floats(in, out);
        default: return isa_portable::projection_packed_floats(in, out);
    }
}

void pack_projection_weights(const float* w, int in, int out, float* packed, Isa isa) {
    switch (usable(isa)) {
        case Isa::avx512: isa_avx512::pack_projection_weights(w, in, out, packed); break;
        case Isa::avx2: isa_avx2::pack_projection_weights(w, in, out, packed); break;
        default: isa_portable::pack_projection_weights(w, in, out, packed); break;
    }
}

std::size_t projection_workspace_bytes(int in, Isa isa, int threads) {
    threads = resolve_threads(threads);
    switch (usable(isa)) {
        case Isa::avx512: return isa_avx512::projection_workspace_bytes(in, threads);
        case Isa::avx2: return isa_avx2::projection_workspace_bytes(in, threads);
        default: return isa_portable::projection_workspace_bytes(in, threads);
    }
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
    threads = resolve_threads(threads);
    switch (usable(isa)) {
        case Isa::avx512: isa_avx512::project(p, threads, workspace); break;
        case Isa::avx2: isa_avx2::project(p, threads, workspace); break;
        default: isa_portable::project(p, threads, workspace); break;
    }
}

}  // namespace attnbatch::kernels
