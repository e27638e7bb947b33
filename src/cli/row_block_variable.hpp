// ATTNBATCH_AVX512_ROWS: the rows per register tile of the avx512 fp32 kernel, for a user who
// measures which suits a CPU the choice by vendor does not know (kernels/isa.hpp,
// avx512_row_block). Results are the same bits either way; only the speed changes.
#pragma once

namespace attnbatch::cli {

inline constexpr const char* kRowBlockVariable = "ATTNBATCH_AVX512_ROWS";

// Applies the variable: unset or empty leaves the CPU's choice, "8" or "12" fixes it. Any other
// value is a usage error (exit 2) naming the variable, its value and what it takes.
void apply_row_block_variable();

}  // namespace attnbatch::cli
