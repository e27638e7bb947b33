// Instruction sets by name and by CPU, all read from the backend table (backends.cpp).
#include "attnbatch/kernels/isa.hpp"

#include <atomic>
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

const char* precision_name(Precision precision) { return precision == Precision::bf16 ? "bf16" : "fp32"; }

std::optional<Precision> find_precision(std::string_view name) {
    if (name == "fp32") return Precision::fp32;
    if (name == "bf16") return Precision::bf16;
    return std::nullopt;
}

namespace {

const Backend* first_runnable(Precision precision) {
    for (const Backend* backend : backends()) {
        if (backend->precision == precision && backend->cpu_supports()) return backend;
    }
    return nullptr;  // fp32: not reached, portable is in every table and runs everywhere
}

}  // namespace

bool isa_available(Isa isa, Precision precision) {
    return isa == Isa::best ? first_runnable(precision) != nullptr : isa.backend()->cpu_supports();
}

Isa resolve_isa(Isa isa, Precision precision) {
    if (isa != Isa::best) return isa;
    if (const Backend* backend = first_runnable(precision)) return Isa(*backend);
    throw std::invalid_argument(std::string("no backend of this build computes in ") + precision_name(precision) +
                                " on this CPU (bf16 needs AVX512-BF16 or AMX-BF16)");
}

Precision isa_precision(Isa isa) { return isa == Isa::best ? Precision::fp32 : isa.backend()->precision; }

namespace {

std::atomic<int> fixed_avx512_row_block{0};

// Intel's cores (two Xeons with AMX measured) lose more to the micro-tile's operand loads from
// L2 than AMD's Zen 5, which gains from the causal diagonal's smaller waste in 8-row blocks.
int avx512_row_block_of_this_cpu() {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_is("intel") ? 12 : 8;
#else
    return 8;
#endif
}

}  // namespace

int avx512_row_block() {
    const int fixed = fixed_avx512_row_block.load(std::memory_order_relaxed);
    if (fixed != 0) return fixed;
    static const int of_this_cpu = avx512_row_block_of_this_cpu();
    return of_this_cpu;
}

void set_avx512_row_block(int rows) {
    if (rows != 0 && rows != 8 && rows != 12) {
        throw std::invalid_argument("avx512 row block: " + std::to_string(rows) + ", expected 8, 12 or 0 (the CPU's choice)");
    }
    fixed_avx512_row_block.store(rows, std::memory_order_relaxed);
}

const char* isa_name(Isa isa) { return isa == Isa::best ? "best" : isa.backend()->name; }

const Backend& usable_backend(Isa isa, const char* user, Precision precision) {
    if (isa != Isa::best && isa.backend()->precision != precision) {
        throw std::invalid_argument(std::string(user) + ": instruction set " + isa_name(isa) + " computes in " +
                                    precision_name(isa.backend()->precision) + ", not " + precision_name(precision));
    }
    if (!isa_available(isa, precision)) {
        if (isa == Isa::best) {
            throw std::invalid_argument(std::string(user) + ": this CPU runs no instruction set that computes in " +
                                        precision_name(precision) + " (bf16 needs AVX512-BF16 or AMX-BF16)");
        }
        throw std::invalid_argument(std::string(user) + ": instruction set " + isa_name(isa) +
                                    " is not available on this CPU");
    }
    return *resolve_isa(isa, precision).backend();
}

}  // namespace attnbatch::kernels
