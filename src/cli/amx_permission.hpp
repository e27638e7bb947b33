// Linux gives a process the AMX tile state only on request; the kernels include no system
// headers and cannot ask, so `run` and `bench` (and the kernel tests) ask here and pass the
// answer on as KernelOptions::amx_permitted.
#pragma once

#include <string>

namespace attnbatch::cli {

// The environment variable that keeps bf16 off the AMX tiles (its AVX512-BF16 path runs
// instead): set to anything but "" or "0".
inline constexpr const char* kNoAmxVariable = "ATTNBATCH_NO_AMX";

// Whether this process may run AMX-BF16 tile instructions: the CPU has them, ATTNBATCH_NO_AMX
// does not forbid them, and Linux granted the tile state (arch_prctl ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA; before it, the first tile instruction raises SIGILL). Asked once per
// process; later calls give the first answer.
bool amx_permitted();

// Why bf16 runs without the tiles on a CPU that has them, for `run`'s header and `bench`:
// "" when the tiles were granted or the CPU has none. Without a reason shown, a refusal
// (an old kernel, a seccomp filter) looks like a slow bf16: on AMX Xeons its AVX512-BF16 path
// ran at about 0.7x fp32.
std::string amx_refusal();
// Linux's refusal alone: amx_refusal() when the CPU has the tiles, ATTNBATCH_NO_AMX did not
// forbid them and Linux refused the request; "" otherwise. For callers that warn (the Python
// module): the variable is the user's own choice, a refusal is not.
std::string amx_linux_refusal();
// The same as the parenthesis that follows "bf16 on avx512-bf16" in those lines, or "".
std::string amx_refusal_note();

// The sentence amx_refusal() gives, from what the request found: whether the CPU has AMX-BF16,
// whether ATTNBATCH_NO_AMX forbade asking, and the errno of Linux's refusal (0: granted).
std::string amx_refusal_reason(bool cpu_has_amx, bool forbidden_by_environment, int refusal_errno);

}  // namespace attnbatch::cli
