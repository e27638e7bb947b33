#include "amx_permission.hpp"

#include <cerrno>
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

struct Answer {
    bool granted = false;
    bool refused_by_linux = false;
    std::string refusal;
};

Answer request() {
    Answer answer;
#if defined(__linux__) && defined(__x86_64__)
    const bool cpu_has_amx = __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16");
    const bool forbidden = disabled_by_environment();
    int refusal_errno = 0;
    if (cpu_has_amx && !forbidden) {
        // From <asm/prctl.h> and the kernel's xstate numbering (Linux 5.16 and later); older kernels
        // refuse the call, and then the tiles stay off.
        constexpr long kArchReqXcompPerm = 0x1023;
        constexpr long kXfeatureXtiledata = 18;
        answer.granted = ::syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
        if (!answer.granted) refusal_errno = errno != 0 ? errno : EPERM;
        answer.refused_by_linux = !answer.granted;
    }
    answer.refusal = amx_refusal_reason(cpu_has_amx, forbidden, refusal_errno);
#endif
    return answer;
}

const Answer& answer() {
    static const Answer first = request();
    return first;
}

}  // namespace

bool amx_permitted() { return answer().granted; }

std::string amx_refusal() { return answer().refusal; }

std::string amx_linux_refusal() { return answer().refused_by_linux ? answer().refusal : std::string(); }

std::string amx_refusal_note() {
    const std::string& why = answer().refusal;
    return why.empty() ? std::string() : " (AMX tiles off: " + why + ")";
}

std::string amx_refusal_reason(bool cpu_has_amx, bool forbidden_by_environment, int refusal_errno) {
    if (!cpu_has_amx) return "";
    if (forbidden_by_environment) return std::string(kNoAmxVariable) + " is set";
    if (refusal_errno == 0) return "";
    return std::string("Linux refused the tile state (arch_prctl ARCH_REQ_XCOMP_PERM: ") + std::strerror(refusal_errno) +
           "; Linux 5.16 or later grants it unless a seccomp filter forbids the call)";
}

}  // namespace attnbatch::cli
