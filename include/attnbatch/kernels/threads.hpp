// How many threads a kernel call runs on: the one rule every layer uses for a thread count of
// 0 (KernelOptions::threads, run --threads, bench --threads).
#pragma once

namespace attnbatch::kernels {

// `threads` when positive, else OpenMP's default (OMP_NUM_THREADS, else every core); 1 in a
// build without OpenMP.
int resolved_threads(int threads);

}  // namespace attnbatch::kernels
