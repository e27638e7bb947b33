// The process's stop request and the phase of the run it arrived in.
//
// SIGTERM, SIGUSR1 and SIGINT ask a run to stop. The handler only records the first signal
// and the phase the run was in; the ranks agree on it at the next stop point of whatever
// phase they are in (stop_point.hpp), store what is computed, and exit 5 with one line naming
// the phase, OUTPUT.partial kept. A second signal ends the process at once: exit 5, the file
// holding what its last flush recorded, or exit 0 once OUTPUT is published.
//
// `attnbatch run` installs the handlers first thing in main(), before HDF5 and MPI start, so
// that a signal during start-up is a stop request like any other rather than the default
// action (which kills the process). The phases are the run's own, in order:
#pragma once

#include <cstdint>

namespace attnbatch::distributed {

enum class Phase : int {
    start_up,             // main() until the options are parsed on every rank (MPI_Init included)
    validation,           // the output path, the input's shapes and types, the weights
    lengths,              // /lengths read and hashed, the output's layout and memory model
    resume_verification,  // --resume: the journal checked and every done unit's checksum re-read
    planning,             // the units and the plan, the free-space check
    value_scan,           // every input value checked for NaN and inf
    output_creation,      // OUTPUT.partial created (or reopened)
    rounds,               // computing and writing
    final_flush,          // the last round's results written and recorded
    publish,              // complete = 1, close, fsync and rename: past the last stop point
    shut_down,            // OUTPUT is published: the summary, MPI_Finalize, exit; nothing left to stop
};
inline constexpr int kPhaseCount = static_cast<int>(Phase::shut_down) + 1;

// "start-up", "validation", "lengths", "resume verification", "planning", "value scan",
// "output creation", "rounds", "final flush", "publish", "shut-down".
const char* name_of(Phase phase) noexcept;
// The same with underscores ("value_scan"): for ATTNBATCH_FAULT sites and --report keys.
const char* key_of(Phase phase) noexcept;

// Installs the handlers for SIGTERM, SIGUSR1 and SIGINT and unblocks those signals (a
// launcher may have blocked them: one that arrived before is then handled now). Idempotent;
// the first call also starts the phase clock (Phase::start_up).
void install_stop_handlers() noexcept;

// The run enters `phase` (every rank, in order). Records when, for the --report, and strikes
// the fault armed for this phase's site, if any (io/output/fault_injection.hpp).
void enter_phase(Phase phase);
// enter_phase(Phase::publish) once the last stop point has let every rank on. A signal that
// came during that agreement, after this rank had voted, could no longer stop the run: it is
// recorded as arriving in publish, the phase in which a signal interrupts nothing.
void pass_last_stop_point();
Phase current_phase() noexcept;
// Wall-clock time (seconds since the Unix epoch) at which `phase` was last entered, or 0
// when it was not; start_up is install_stop_handlers()'s first call.
double phase_entered_at(Phase phase) noexcept;

// The first stop signal received (SIGTERM, SIGUSR1, SIGINT), 0 while none.
int stop_signal() noexcept;
// The phase that signal arrived in (meaningful only when stop_signal() != 0).
Phase stop_phase() noexcept;

const char* signal_name(int signal) noexcept;

// What the handler does on a first signal: a test drives a stop without a real signal.
void request_stop(int signal) noexcept;
// Forgets a stop request, so that one process can run a job after an interrupted one (tests).
void clear_stop_request() noexcept;

}  // namespace attnbatch::distributed
