// The backend table: every backend of this build in preference order, widest first, so that
// `best` is the first row this CPU runs. Adding a backend is its file, its row here and its
// line in CMakeLists.txt.
//
// A row names a record that its file defines. A file that cannot be built for this target is
// left out by CMake, and its row is left out here under the same condition, which CMake
// passes on (ATTNBATCH_X86_BACKENDS): no file needs a "not built" stand-in. (Weak symbols
// would spare the condition, but a static library links no member for a weak reference.)
#include "backend.hpp"

namespace attnbatch::kernels {

extern const Backend avx512_backend, avx512_bf16_backend, avx2_backend, portable_backend;

namespace {

const Backend* const kTable[] = {
#if defined(ATTNBATCH_X86_BACKENDS)
    &avx512_backend,
    &avx512_bf16_backend,  // bf16: `best` for --precision bf16
    &avx2_backend,
#endif
    &portable_backend,  // last: it runs everywhere
};

}  // namespace

BackendTable backends() { return {kTable, kTable + sizeof kTable / sizeof kTable[0]}; }

const Isa Isa::best{};
const Isa Isa::portable{portable_backend};

}  // namespace attnbatch::kernels
