#include "input/mapping_faults.hpp"

#include "attnbatch/error.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace attnbatch::io::detail {

namespace {

// Read by the handler: lock-free atomics are async-signal-safe. A slot's message is written
// before its range is published (release) and read after the range is seen (acquire).
struct Watched {
    std::atomic<std::uintptr_t> begin{0}, end{0};
    char message[512] = {};
    std::size_t message_length = 0;
};
static_assert(std::atomic<std::uintptr_t>::is_always_lock_free);
constexpr std::size_t kSlots = 64;
Watched watched[kSlots];
std::mutex slots_mutex;  // registrations only, never the handler
struct sigaction previous {};
std::once_flag installed;

extern "C" void on_bus_error(int signal, siginfo_t* info, void* context) {
    const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
    for (const Watched& slot : watched) {
        const std::uintptr_t begin = slot.begin.load(std::memory_order_acquire);
        if (begin != 0 && address >= begin && address < slot.end.load(std::memory_order_relaxed)) {
            (void)!::write(STDERR_FILENO, slot.message, slot.message_length);
            _exit(exit_io);
        }
    }
    // Not ours: as if this handler had never been installed.
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction) return previous.sa_sigaction(signal, info, context);
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        return previous.sa_handler(signal);
    }
    ::signal(signal, SIG_DFL);  // the faulting access runs again, and the default action ends it
}

void install() {
    struct sigaction action {};
    action.sa_sigaction = on_bus_error;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &previous);
}

}  // namespace

void watch_mapping(const void* begin, std::size_t length, const std::string& path) noexcept {
    if (begin == nullptr || length == 0) return;
    std::call_once(installed, install);
    const std::lock_guard<std::mutex> lock(slots_mutex);
    for (Watched& slot : watched) {
        if (slot.begin.load(std::memory_order_relaxed) != 0) continue;
        const std::string line = "attnbatch: error: " + path +
                                 " changed while the run read it (the file was shortened or rewritten under its "
                                 "mapping); expected the input unchanged until the run ends\n";
        slot.message_length = std::min(line.size(), sizeof(slot.message));
        std::memcpy(slot.message, line.data(), slot.message_length);
        slot.message[slot.message_length - 1] = '\n';  // a path too long for the slot is cut, the line ended
        const auto at = reinterpret_cast<std::uintptr_t>(begin);
        slot.end.store(at + length, std::memory_order_relaxed);
        slot.begin.store(at, std::memory_order_release);
        return;
    }
}

void forget_mapping(const void* begin) noexcept {
    if (begin == nullptr) return;
    const std::lock_guard<std::mutex> lock(slots_mutex);
    for (Watched& slot : watched) {
        if (slot.begin.load(std::memory_order_relaxed) == reinterpret_cast<std::uintptr_t>(begin)) {
            slot.begin.store(0, std::memory_order_release);
            slot.end.store(0, std::memory_order_relaxed);
        }
    }
}

}  // namespace attnbatch::io::detail
