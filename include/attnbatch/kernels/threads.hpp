// How many threads a kernel call runs on: the one rule every layer uses for a thread count of
// 0 (KernelOptions::threads, run --threads, bench --threads); and the CPU time those threads
// use, read beside wall time (bench's on_cpu, run's compute_cpu).
#pragma once

namespace attnbatch::kernels {

// `threads` when positive, else OpenMP's default (OMP_NUM_THREADS, else every core); 1 in a
// build without OpenMP.
int resolved_threads(int threads);

struct CpuSeconds {
    double total = 0;   // CLOCK_THREAD_CPUTIME_ID: exact to the call
    double system = 0;  // getrusage(RUSAGE_THREAD)'s system share: by the scheduler's ticks
    // From `start` to this reading; the system share, a sampled estimate, kept within the total.
    CpuSeconds since(const CpuSeconds& start) const noexcept;
};

// The calling thread's CPU time so far (zero where the system keeps none per thread). Its
// system share is what the operating system charged the thread: for a compute, mostly first
// touches of fresh memory, dear on a virtual machine whose host has taken freed memory back.
CpuSeconds thread_cpu_times() noexcept;

// CPU time that the first `threads` threads of the OpenMP team (the ones a kernel call with
// that many threads runs on) have had so far, summed. Each thread reads its own clock, which the
// kernel brings up to date for the reader: a process-wide clock read by one thread counts the
// others' time only as of their last tick, milliseconds off for a call of a few milliseconds.
CpuSeconds team_cpu_times(int threads) noexcept;
inline double team_cpu_seconds(int threads) { return team_cpu_times(threads).total; }

}  // namespace attnbatch::kernels
