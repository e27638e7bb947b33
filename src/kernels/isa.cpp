// Instruction sets by name and by CPU, all read from the backend table (backends.cpp).
#include "attnbatch/kernels/isa.hpp"

#include <stdexcept>
#include <string>

#include "backend.hpp"

namespace attnbatch::kernels {

std::optional<Isa> find_isa(std::string_view name) {
    if (name == isa_name(Isa::best)) return Isa::best;
    for (const Backend* backend : backends()) {
        if (name == backend->name) return Isa(*backend);
    }
    return std::nullopt;
}

std::vector<Isa> built_isas() {
    std::vector<Isa> isas;
    for (const Backend* backend : backends()) isas.emplace_back(*backend);
    return isas;
}

std::vector<std::string> isa_names() {
    std::vector<std::string> names{isa_name(Isa::best)};
    for (const Backend* backend : backends()) names.emplace_back(backend->name);
    return names;
}

bool isa_available(Isa isa) { return isa == Isa::best || isa.backend()->cpu_supports(); }

Isa resolve_isa(Isa isa) {
    if (isa != Isa::best) return isa;
    for (const Backend* backend : backends()) {
        if (backend->cpu_supports()) return Isa(*backend);
    }
    return Isa::portable;  // not reached: portable is in every table and runs everywhere
}

const char* isa_name(Isa isa) { return isa == Isa::best ? "best" : isa.backend()->name; }

const Backend& usable_backend(Isa isa, const char* user) {
    if (!isa_available(isa)) {
        throw std::invalid_argument(std::string(user) + ": instruction set " + isa_name(isa) +
                                    " is not available on this CPU");
    }
    return *resolve_isa(isa).backend();
}

}  // namespace attnbatch::kernels
