// A guard against Open MPI's launcher outliving its job.
//
// mpirun 4.1.4 with PMIx 4.2.2 (Debian 12) ends a job whose rank was killed during MPI_Init's
// PMIx handshake as it should (it kills the other ranks and picks an exit code), then blocks
// for ever in PMIx_server_finalize, locking a mutex inside an object it has already freed. No
// rank is left, mpirun does not exit, and it answers no SIGTERM. A 6-line MPI_Init/MPI_Finalize
// program hangs it the same way: the bug is Open MPI's, the wait it leaves is attnbatch's to
// bound. Only a process started before MPI_Init can still act: this watchdog.
#pragma once

#include <sys/types.h>

namespace attnbatch::distributed {

struct LauncherWatch {
    pid_t launcher = 0;        // the process to watch: mpirun, or orted on another node; 0: none
    double grace_seconds = 3;  // how long it may live on with no live child once this rank is gone
};

// This process's parent when it is Open MPI's launcher (orterun, which mpirun and mpiexec are,
// or orted), else none (a singleton, srun, a wrapper that did not exec). The grace grows by a
// quarter of a second per local rank (up to 8): of the watchdogs of one launcher, the first
// acts and speaks, the others find it gone.
LauncherWatch open_mpi_launcher_watch() noexcept;

// Starts the watchdog: a process of its own (own session, working directory /, none of this
// process's descriptors) that waits for this process to end. If it ends without
// release_launcher_watchdog (killed, crashed, _exit), the watchdog watches `watch.launcher`
// until it is gone; one that has had no live child (zombies are not alive) for
// `watch.grace_seconds` is stuck: the watchdog says so on the launcher's stderr and kills it
// (SIGKILL; a healthy mpirun exits within 0.3 s of its last rank here, even on a loaded node).
// Returns the handle for release_launcher_watchdog; -1 when no watchdog could be started.
int start_launcher_watchdog(const LauncherWatch& watch) noexcept;

// This process ends in order: its watchdog leaves without watching. -1 is ignored.
void release_launcher_watchdog(int handle) noexcept;

}  // namespace attnbatch::distributed
