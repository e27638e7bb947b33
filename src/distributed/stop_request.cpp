#include "attnbatch/distributed/stop_request.hpp"

#include <csignal>
#include <initializer_list>
#include <unistd.h>

#include "attnbatch/error.hpp"

namespace attnbatch::distributed {

namespace {

volatile std::sig_atomic_t first_signal = 0;



extern "C" void on_stop_signal(int signal) {
    if (first_signal != 0) _exit(exit_interrupted);  // async-signal-safe: no flush, no destructors
    first_signal = signal;
}

}  // namespace

void install_stop_handlers() {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // blocking reads and writes go on; the flag is read between rounds
    for (int signal : {SIGTERM, SIGUSR1, SIGINT}) sigaction(signal, &action, nullptr);
}

int stop_signal() noexcept { return first_signal; }

void request_stop(int signal) noexcept {
    if (first_signal == 0) first_signal = signal;
}

void clear_stop_request() noexcept { first_signal = 0; }

const char* signal_name(int signal) noexcept {
    switch (signal) {
        case SIGTERM: return "SIGTERM";
        case SIGUSR1: return "SIGUSR1";
        case SIGINT: return "SIGINT";
        default: return "a signal";
    }
}

}  // namespace attnbatch::distributed
