#include "attnbatch/distributed/stop_request.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <pthread.h>
#include <initializer_list>
#include <unistd.h>

#include "attnbatch/error.hpp"
#include "attnbatch/io/output/fault_injection.hpp"

namespace attnbatch::distributed {

namespace {

// Read and written by the handler: lock-free atomics are async-signal-safe (and the ranks of
// the thread-based test Comm share them).
static_assert(std::atomic<int>::is_always_lock_free);
std::atomic<int> first_signal{0};
std::atomic<int> phase_now{static_cast<int>(Phase::start_up)};
std::atomic<int> phase_at_signal{static_cast<int>(Phase::start_up)};

std::atomic<double> entered_at[kPhaseCount] = {};
std::atomic<bool> installed{false};

double unix_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

extern "C" void on_stop_signal(int signal) {
    if (first_signal.load() != 0) {
        // At once: no flush, no destructors (async-signal-safe). The file keeps what its last
        // flush recorded; once OUTPUT is published there is nothing left to interrupt.
        _exit(phase_now.load() == static_cast<int>(Phase::shut_down) ? exit_ok : exit_interrupted);
    }
    phase_at_signal.store(phase_now.load());
    first_signal.store(signal);
}

}  // namespace

const char* name_of(Phase phase) noexcept {
    switch (phase) {
        case Phase::start_up: return "start-up";
        case Phase::validation: return "validation";
        case Phase::lengths: return "lengths";
        case Phase::resume_verification: return "resume verification";
        case Phase::planning: return "planning";
        case Phase::value_scan: return "value scan";
        case Phase::output_creation: return "output creation";
        case Phase::rounds: return "rounds";
        case Phase::final_flush: return "final flush";
        case Phase::publish: return "publish";
        case Phase::shut_down: return "shut-down";
    }
    return "?";
}

const char* key_of(Phase phase) noexcept {
    switch (phase) {
        case Phase::start_up: return "start_up";
        case Phase::validation: return "validation";
        case Phase::lengths: return "lengths";
        case Phase::resume_verification: return "resume_verification";
        case Phase::planning: return "planning";
        case Phase::value_scan: return "value_scan";
        case Phase::output_creation: return "output_creation";
        case Phase::rounds: return "rounds";
        case Phase::final_flush: return "final_flush";
        case Phase::publish: return "publish";
        case Phase::shut_down: return "shut_down";
    }
    return "?";
}

void install_stop_handlers() noexcept {
    struct sigaction action {};
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    for (int signal : {SIGTERM, SIGUSR1, SIGINT}) sigaddset(&stop_signals, signal);
    action.sa_handler = on_stop_signal;
    action.sa_mask = stop_signals;  // one handler at a time: of two signals, the second is the second
    action.sa_flags = SA_RESTART;   // blocking reads and writes go on; the flag is read at stop points
    for (int signal : {SIGTERM, SIGUSR1, SIGINT}) sigaction(signal, &action, nullptr);
    // Handled from here on: a signal that was blocked and pending arrives now, as a request.
    pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
    if (!installed.exchange(true)) entered_at[static_cast<int>(Phase::start_up)].store(unix_seconds());
}

void enter_phase(Phase phase) {
    phase_now.store(static_cast<int>(phase));
    entered_at[static_cast<int>(phase)].store(unix_seconds());
    io::fault_point(key_of(phase));
}

void pass_last_stop_point() {
    enter_phase(Phase::publish);
    // The handler stores the phase before the signal, so a signal seen here has its phase set;
    // one arriving from now on finds publish itself.
    if (first_signal.load() != 0) phase_at_signal.store(static_cast<int>(Phase::publish));
}

Phase current_phase() noexcept { return static_cast<Phase>(phase_now.load()); }

double phase_entered_at(Phase phase) noexcept { return entered_at[static_cast<int>(phase)].load(); }

int stop_signal() noexcept { return first_signal.load(); }

Phase stop_phase() noexcept { return static_cast<Phase>(phase_at_signal.load()); }

void request_stop(int signal) noexcept {
    int none = 0;
    const int phase = phase_now.load();
    if (first_signal.compare_exchange_strong(none, signal)) phase_at_signal.store(phase);
}

void clear_stop_request() noexcept {
    first_signal.store(0);
    phase_now.store(static_cast<int>(Phase::start_up));
    phase_at_signal.store(static_cast<int>(Phase::start_up));
}

const char* signal_name(int signal) noexcept {
    switch (signal) {
        case SIGTERM: return "SIGTERM";
        case SIGUSR1: return "SIGUSR1";
        case SIGINT: return "SIGINT";
        default: return "a signal";
    }
}

}  // namespace attnbatch::distributed
