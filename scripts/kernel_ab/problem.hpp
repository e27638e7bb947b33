// What the driver (driver.cpp) hands each side (side.cpp) of kernel_ab.sh in plain types, so that
// the two sides may be built from revisions whose own types differ.
#pragma once

#include <cstddef>

struct AbProblem {
    const float* q;
    const float* k;
    const float* v;
    float* out;
    float* lse;
    int batch, heads, len, dim;  // [batch, heads, len, dim], contiguous
    int threads;
};

enum AbKernel { ab_fp32 = 0, ab_bf16 = 1 };
