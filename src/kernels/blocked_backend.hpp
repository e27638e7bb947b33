// One instruction set's build of the fp32 blocked attention kernel (blocked_attention.hpp on the
// products of fp32_products.hpp) and the projections (projection_impl.hpp), and the backend
// record that puts them in the table.
// Included once by each blocked_<isa>.cpp, which first defines
//   ATTNBATCH_ISA_NAMESPACE  a namespace of its own (isa_avx2, ...)
//   ATTNBATCH_VECTOR_BYTES   the vector width: 16, 32 or 64
//   ATTNBATCH_MR             query rows per micro-tile
//   ATTNBATCH_NV             vectors per micro-tile row (ATTNBATCH_NV_PV for P V, if it differs)
// and is compiled with its instruction set's flags (CMakeLists.txt). Everything lives in that
// namespace and no inline function of the standard library is used, so the linker never
// merges code compiled for one instruction set into another.
#pragma once

#include "backend.hpp"
#include "fp32_products.hpp"
#include "blocked_attention.hpp"
#include "projection_impl.hpp"

namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE {

constexpr Backend blocked_backend(const char* name, bool (*cpu_supports)(), Tiles default_tiles) {
    return Backend{name,
                   cpu_supports,
                   default_tiles,
                   Precision::fp32,
                   nullptr,
                   nullptr,
                   workspace_bytes,
                   forward,
                   projection_packed_floats,
                   pack_projection_weights,
                   projection_workspace_bytes,
                   project};
}

}  // namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE
