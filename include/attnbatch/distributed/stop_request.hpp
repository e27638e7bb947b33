// SIGTERM, SIGUSR1 and SIGINT ask a run to stop at the next round boundary: the ranks agree,
// store what is computed, flush and exit 5 with OUTPUT.partial kept. A second signal ends
// the process at once (exit 5); the file then holds what its last flush recorded.
#pragma once

namespace attnbatch::distributed {

void install_stop_handlers();

// The first stop signal received (SIGTERM, SIGUSR1, SIGINT), 0 while none.
int stop_signal() noexcept;

const char* signal_name(int signal) noexcept;

// What the handler does on a first signal: a test drives a stop without a real signal.
void request_stop(int signal) noexcept;
// Forgets a stop request, so that one process can run a job after an interrupted one (tests).
void clear_stop_request() noexcept;

}  // namespace attnbatch::distributed
