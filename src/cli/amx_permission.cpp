#include "amx_permission.hpp"

#include <cstdlib>
#include <cstring>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace attnbatch::cli {

namespace {

bool disabled_by_environment() {
    const char* value = std::getenv(kNoAmxVariable);
    return value != nullptr && std::strcmp(value, "") != 0 && std::strcmp(value, "0") != 0;
}

bool request() {
#if defined(__linux__) && defined(__x86_64__)
    if (disabled_by_environment()) return false;
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16")) return false;
    // From <asm/prctl.h> and the kernel's xstate numbering (Linux 5.16 and later); older kernels
    // refuse the call, and then the tiles stay off.
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    return ::syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
}

}  // namespace

bool amx_permitted() {
    static const bool granted = request();
    return granted;
}

}  // namespace attnbatch::cli
