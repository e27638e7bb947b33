// CPU time used so far by the calling thread, or by the OpenMP team it leads. Set beside wall
// time it tells a compute that ran slowly from one that waited for its core (a rank's main
// thread shares a core with its compute), and its system share shows what the operating system
// charged the compute: mostly first touches of fresh memory, dear on a virtual machine whose
// host has taken freed memory back (docs/performance-log.md).
#pragma once

namespace attnbatch::distributed {

struct CpuSeconds {
    double total = 0;   // CLOCK_THREAD_CPUTIME_ID: exact to the call
    double system = 0;  // getrusage(RUSAGE_THREAD)'s system share: by the scheduler's ticks
    // From `start` to this reading; the system share, a sampled estimate, kept within the total.
    CpuSeconds since(const CpuSeconds& start) const noexcept;
};

// Zero where the system keeps no per-thread CPU time.
CpuSeconds thread_cpu_seconds() noexcept;

// Summed over the OpenMP team of `threads` the calling thread starts (the one its parallel
// regions reuse), the calling thread included.
CpuSeconds team_cpu_seconds(int threads) noexcept;

}  // namespace attnbatch::distributed
