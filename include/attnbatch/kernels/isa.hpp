// Instruction sets of the blocked kernel and the projections. Each is a backend of this build,
// a row of the table in src/kernels/backends.cpp: which rows a build has depends on the target
// (x86 builds add AVX2, AVX-512 and the bf16 backend), which of them run depends on the CPU,
// checked at run time. Each backend computes attention in one precision (fp32 or bf16); `best`
// is chosen among the backends of the precision asked for.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnbatch::kernels {

struct Backend;  // a backend record, private to src/kernels (src/kernels/backend.hpp)

// The arithmetic of attention's two matrix products. fp32: everything in single precision, the
// reference mode. bf16: Q, K, V and the probabilities P rounded to bfloat16 (round to nearest
// even) for Q K^T and P V, each accumulated in fp32; softmax, its running max and sum, and
// every output in fp32. Projections are fp32 in both.
enum class Precision { fp32, bf16 };

const char* precision_name(Precision precision);  // "fp32", "bf16"
std::optional<Precision> find_precision(std::string_view name);

// One backend of this build, or `best`: the first backend in the table's preference order
// (widest first) that this CPU runs, chosen when the kernel is called (resolve_isa).
class Isa {
public:
    constexpr Isa() = default;  // best
    explicit constexpr Isa(const Backend& backend) : backend_(&backend) {}

    static const Isa best;
    static const Isa portable;  // built for every target, runs on every CPU

    constexpr const Backend* backend() const { return backend_; }  // null for best

    friend constexpr bool operator==(Isa a, Isa b) { return a.backend_ == b.backend_; }
    friend constexpr bool operator!=(Isa a, Isa b) { return a.backend_ != b.backend_; }

private:
    const Backend* backend_ = nullptr;
};

// "best" or the name of a backend of this build; nothing for any other text.
std::optional<Isa> find_isa(std::string_view name);

// The backends of this build in preference order, widest first (without best).
std::vector<Isa> built_isas();

// "best", then the names of built_isas(): every name find_isa accepts.
std::vector<std::string> isa_names();

// Whether this CPU runs `isa`; best: whether it runs some backend of `precision` (fp32: always).
bool isa_available(Isa isa, Precision precision = Precision::fp32);

// best: the first of built_isas() of `precision` that this CPU runs (std::invalid_argument when
// there is none: bf16 needs AVX512-BF16 or AMX-BF16); any other isa unchanged.
Isa resolve_isa(Isa isa, Precision precision = Precision::fp32);

// The precision a backend computes in (best: fp32).
Precision isa_precision(Isa isa);

// Rows per register tile of the avx512 backend's fp32 attention: 12 on Intel cores, 8 on others
// (AMD's), each the faster there (docs/performance.md, "The kernel"). Both give the same bits:
// the choice changes the speed only. set_avx512_row_block(8 or 12) fixes it for the process
// (tests; anything else throws std::invalid_argument), 0 gives it back to the CPU.
int avx512_row_block();
void set_avx512_row_block(int rows);

// The name find_isa accepts. Output files record it in their resume identity, so a backend's
// name never changes.
const char* isa_name(Isa isa);

}  // namespace attnbatch::kernels
