// The launcher's messages at MPI_Finalize sent at once, not after TCP's delayed ACK.
//
// Open MPI 4.1 with PMIx 4 (Debian 12) talks to its launcher (mpirun, orted) over a TCP socket
// on the loopback that PMIx leaves with Nagle's algorithm on. MPI_Finalize's fence writes four
// small messages back to back; the second waits until the launcher acknowledges the first, which
// Linux delays by up to 40 ms (TCP_DELACK_MIN), and the launcher answers only when all four are
// in. Measured here (mpirun -np 2, a 4-sequence run): strace showed both ranks waiting 42 ms in
// the fence with nothing to do, and a run took 0.12-0.14 s against 0.08-0.09 s with
// TCP_NODELAY set on that socket before MPI_Finalize (docs/performance-log.md, "Start-up and
// shut-down"). Every run pays it once, so it is a third of a short run's wall time.
#pragma once

namespace attnbatch::distributed {

// Sets TCP_NODELAY on every TCP socket this process holds (PMIx's is one; Open MPI's own TCP
// transports set it already). It changes when segments leave, never what they carry. Returns
// how many sockets it set; best effort, errors are ignored.
int send_launcher_messages_at_once() noexcept;

}  // namespace attnbatch::distributed
