// A kernel backend: one instruction set's attention kernel and projections, as a record of
// plain function pointers. Each backend file defines one record (blocked_avx512.cpp defines
// avx512_backend, ...), backends.cpp lists them in preference order, and everything else
// (dispatch.cpp, projection.cpp, isa.cpp) only walks that table.
#pragma once

#include <cstddef>

#include "attnbatch/kernels/attention.hpp"
#include "attnbatch/kernels/projection.hpp"

namespace attnbatch::kernels {

struct Tiles {
    int block_q, block_k;
};

struct Backend {
    // The --isa value; output files record it in their resume identity, so it never changes.
    const char* name;
    // Whether this CPU runs the backend's instructions. It is called on every CPU, before any
    // other code of the backend: it must not use those instructions itself.
    bool (*cpu_supports)();
    // Tile sizes when KernelOptions leaves them at 0, measured with `attnbatch bench`.
    Tiles default_tiles;
    // The arithmetic of its attention (isa.hpp); `best` picks among backends of one precision.
    Precision precision;
    // What its matrix products run on, where the backend chooses at run time (bf16: AMX tiles
    // when permitted and present, else AVX512-BF16); null: the backend's name says it.
    const char* (*matrix_unit)(bool amx_permitted);
    // Rows per register tile of its attention, where the backend picks them by CPU (avx512:
    // avx512_row_block, isa.hpp); null: fixed by its build.
    int (*row_block)();

    // Attention (attention.hpp), parameters already checked; threads > 0, the workspace at least
    // workspace_bytes for the same parameters, tiles and threads. amx_permitted: KernelOptions'.
    std::size_t (*workspace_bytes)(const AttentionParams& p, int block_q, int block_k, int threads);
    void (*forward)(const AttentionParams& p, int block_q, int block_k, int threads, bool amx_permitted,
                    void* workspace);

    // Projections (projection.hpp). W is packed in the backend's own panel layout, so project
    // takes only weights packed by the same backend.
    std::size_t (*projection_packed_floats)(int in, int out);
    void (*pack_projection_weights)(const float* w, int in, int out, float* packed);
    std::size_t (*projection_workspace_bytes)(int in, int threads);
    void (*project)(const ProjectionParams& p, int threads, void* workspace);
};

// The backends of this build in preference order, widest first (backends.cpp).
struct BackendTable {
    const Backend* const* first;
    const Backend* const* last;
    const Backend* const* begin() const { return first; }
    const Backend* const* end() const { return last; }
};
BackendTable backends();

// The backend that runs for `isa` on this CPU: best resolved among the backends of
// `precision`, the CPU checked. Throws std::invalid_argument naming `user` ("attention kernel",
// "projection") when the CPU lacks it or an explicit isa computes in another precision.
const Backend& usable_backend(Isa isa, const char* user, Precision precision = Precision::fp32);

}  // namespace attnbatch::kernels
