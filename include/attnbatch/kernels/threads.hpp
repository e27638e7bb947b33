// How many threads a kernel call runs on: the one rule every layer uses for a thread count of
// 0 (KernelOptions::threads, run --threads, bench --threads); and the CPU time those threads
// use, read beside wall time (bench's on_cpu, run's compute_cpu).
#pragma once

namespace attnbatch::kernels {

// The most threads a thread count may ask for. The largest nodes have a few hundred hardware
// threads; tens of thousands made OpenMP fail to start them (libgomp aborted, or the process
// crashed) instead of being refused as a mistyped option.
inline constexpr int max_threads = 1024;

// `threads` when positive, else OpenMP's default (OMP_NUM_THREADS, else every core); 1 in a
// build without OpenMP.
int resolved_threads(int threads);

// The calling thread's CPU seconds so far (CLOCK_THREAD_CPUTIME_ID).
double thread_cpu_seconds();

// CPU seconds that the first `threads` threads of the OpenMP team (the ones a kernel call with
// that many threads runs on) have had so far, summed. Each thread reads its own clock, which the
// kernel brings up to date for the reader: a process-wide clock read by one thread counts the
// others' time only as of their last tick, milliseconds off for a call of a few milliseconds.
double team_cpu_seconds(int threads);

}  // namespace attnbatch::kernels
