// Force-included into src/kernels in the fuzz build only (fuzz/CMakeLists.txt): clang 14
// rejects __builtin_cpu_supports("f16c"), which GCC accepts (src/kernels/blocked_avx2.cpp). This
// routes the builtin through a function that asks CPUID for f16c and the builtin for the rest.
#pragma once

#if defined(__clang__) && __clang_major__ < 16 && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#include <cstring>

// static: the backend files that call it are compiled for different instruction sets, and an
// inline function would be merged across them.
static inline bool attnbatch_fuzz_cpu_supports(const char* feature) {
    if (std::strcmp(feature, "f16c") == 0) {
        unsigned a = 0, b = 0, c = 0, d = 0;
        return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
    }
    if (std::strcmp(feature, "avx2") == 0) return __builtin_cpu_supports("avx2");
    if (std::strcmp(feature, "fma") == 0) return __builtin_cpu_supports("fma");
    if (std::strcmp(feature, "avx512f") == 0) return __builtin_cpu_supports("avx512f");
    if (std::strcmp(feature, "avx512vl") == 0) return __builtin_cpu_supports("avx512vl");
    if (std::strcmp(feature, "avx512bw") == 0) return __builtin_cpu_supports("avx512bw");
    if (std::strcmp(feature, "avx512dq") == 0) return __builtin_cpu_supports("avx512dq");
    return false;
}
#define __builtin_cpu_supports(feature) attnbatch_fuzz_cpu_supports(feature)
#endif
