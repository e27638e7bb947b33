// This core's single-precision FMA peak, measured with a register-only loop.
#pragma once

namespace attnbatch::kernels {

struct FmaPeak {
    double gflops_per_core = 0.0;  // best of several timed bursts, one thread
    int vector_bits = 0;           // width of the FMA instructions timed (512, 256 or 128)
};

// Times independent FMA chains written in inline assembly (the compiler can neither merge
// nor drop them) at the widest width this CPU runs. Takes about `seconds`.
FmaPeak measure_fma_peak(double seconds = 0.3);

}  // namespace attnbatch::kernels
