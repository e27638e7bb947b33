// Linux gives a process the AMX tile state only on request; the kernels include no system
// headers and cannot ask, so `run` and `bench` (and the kernel tests) ask here and pass the
// answer on as KernelOptions::amx_permitted.
#pragma once

namespace attnbatch::cli {

// The environment variable that keeps bf16 off the AMX tiles (its AVX512-BF16 path runs
// instead): set to anything but "" or "0".
inline constexpr const char* kNoAmxVariable = "ATTNBATCH_NO_AMX";

// Whether this process may run AMX-BF16 tile instructions: the CPU has them, ATTNBATCH_NO_AMX
// does not forbid them, and Linux granted the tile state (arch_prctl ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA; before it, the first tile instruction raises SIGILL). Asked once per
// process; later calls give the first answer.
bool amx_permitted();

}  // namespace attnbatch::cli
