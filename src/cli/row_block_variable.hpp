// ATTNBATCH_AVX512_ROWS: the rows per register tile of the avx512 fp32 kernel, for a user who
// measures which suits a CPU the choice by vendor does not know (kernels/isa.hpp,
// avx512_row_block). Results are the same bits either way; only the speed changes.
#pragma once

namespace attnbatch::cli {

inline constexpr const char* kRowBlockVariable = "ATTNBATCH_AVX512_ROWS";

// Applies the variable: unset or empty gives the CPU's choice, "8" or "12" fixes it. Any other
// value is a usage error (exit 2) naming the variable, its value and what it takes. The command
// line applies it once; the Python module at every call, so that a change of os.environ counts.
void apply_row_block_variable();

}  // namespace attnbatch::cli
