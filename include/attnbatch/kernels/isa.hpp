// Instruction sets of the blocked kernel and the projections. Each is a backend of this build,
// a row of the table in src/kernels/backends.cpp: which rows a build has depends on the target
// (x86 builds add AVX2 and AVX-512), which of them run depends on the CPU, checked at run time.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnbatch::kernels {

struct Backend;  // a backend record, private to src/kernels (src/kernels/backend.hpp)

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

// Whether this CPU runs `isa` (best: always).
bool isa_available(Isa isa);

// best: the first of built_isas() this CPU runs; any other isa unchanged.
Isa resolve_isa(Isa isa);

// The name find_isa accepts. Output files record it in their resume identity, so a backend's
// name never changes.
const char* isa_name(Isa isa);

}  // namespace attnbatch::kernels
