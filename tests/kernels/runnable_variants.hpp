// Which kernel variants a test can run here, for tests that take one variant each: a CPU
// without a variant's instructions, or a process without the OS's consent to AMX tile state,
// reports that variant's tests skipped with the reason (GTEST_SKIP; ctest lists them skipped).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/kernel_test_support.hpp"

namespace attnbatch::test {

// The bf16 variants of the build: avx512_bf16 on AVX512-BF16 dot products, and on AMX tiles.
inline std::vector<Variant> bf16_variants() {
    std::vector<Variant> bf16;
    for (const Variant& v : all_variants()) {
        if (v.kind == kn::KernelKind::blocked && v.precision == kn::Precision::bf16) bf16.push_back(v);
    }
    return bf16;
}

// Why `variant` cannot run here; empty when it can.
inline std::string why_unavailable(const Variant& variant) {
    if (variant_available(variant)) return "";
    if (!kn::isa_available(variant.isa)) {
        return std::string("this CPU lacks the instruction set of the ") + kn::isa_name(variant.isa) + " kernel";
    }
#if defined(__x86_64__) || defined(__i386__)
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16")) {
        return "this CPU has no AMX tiles (AMX-TILE, AMX-BF16); the tile path is checked on its emulation "
               "(amx_emulation_test.cpp)";
    }
#endif
    return "the operating system did not grant this process AMX tile state (arch_prctl XTILEDATA)";
}

// A test of one variant (the parameter): skipped, with the reason, where it cannot run.
class VariantTest : public ::testing::TestWithParam<Variant> {
protected:
    void SetUp() override {
        const std::string why = why_unavailable(GetParam());
        if (!why.empty()) GTEST_SKIP() << GetParam().name << ": " << why;
    }
};

}  // namespace attnbatch::test
