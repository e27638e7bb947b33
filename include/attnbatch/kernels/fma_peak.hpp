// This core's single-precision FMA peak, measured with a register-only loop.
#pragma once

namespace attnbatch::kernels {

struct FmaPeak {
    double gflops_per_core = 0.0;  // best of several timed bursts, per thread
    int vector_bits = 0;           // width of the FMA instructions timed (512, 256 or 128)
};

// Times independent FMA chains written in inline assembly (the compiler can neither merge
// nor drop them) at the widest width this CPU runs. Takes about `seconds`.
FmaPeak measure_fma_peak(double seconds = 0.3);

// The same on `threads` OpenMP threads at once, each timing its own bursts: gflops_per_core is
// their mean. What a kernel on those threads can reach: cores of a shared or virtual machine
// need not be alike, nor as fast together as alone, and one core's peak times the thread count
// assumes both.
FmaPeak measure_fma_peak_together(int threads, double seconds = 0.3);

}  // namespace attnbatch::kernels
