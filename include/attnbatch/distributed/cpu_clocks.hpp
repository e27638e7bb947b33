// The CPU clocks a run reports beside its wall times (RankTimes::compute_cpu, compute_system,
// io_cpu): a thread's or an OpenMP team's CPU time, and the system's share of it, which for a
// compute is mostly first touches of fresh memory, dear on a virtual machine whose host has
// taken freed memory back (docs/performance-log.md).
#pragma once

namespace attnbatch::distributed {

struct CpuSeconds {
    double total = 0;   // kernels::thread_cpu_seconds: exact to the call
    double system = 0;  // getrusage(RUSAGE_THREAD)'s system time: by the scheduler's ticks
    // From `start` to this reading; the system share, a sampled estimate, kept within the total.
    CpuSeconds since(const CpuSeconds& start) const noexcept;
};

// The calling thread's, so far (system 0 where the system keeps no per-thread account).
CpuSeconds thread_cpu_times();

// Summed over the first `threads` threads of the calling thread's OpenMP team, as
// kernels::team_cpu_seconds.
CpuSeconds team_cpu_times(int threads);

}  // namespace attnbatch::distributed
