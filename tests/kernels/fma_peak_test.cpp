// The FMA peak probe bench divides by: one thread, and every thread at once.
#include <cmath>

#include <gtest/gtest.h>

#include "attnbatch/kernels/fma_peak.hpp"

namespace {

using attnbatch::kernels::measure_fma_peak;
using attnbatch::kernels::measure_fma_peak_together;

TEST(FmaPeak, OneThreadTimesTheWidestFma) {
    const auto peak = measure_fma_peak(0.02);
#if defined(__x86_64__)
    EXPECT_TRUE(peak.vector_bits == 512 || peak.vector_bits == 256 || peak.vector_bits == 128) << peak.vector_bits;
#endif
    EXPECT_TRUE(std::isfinite(peak.gflops_per_core));
    EXPECT_GT(peak.gflops_per_core, 0.0);
}

// Every thread times its own bursts: the mean is a rate per core (finite, positive) of the same
// instructions as one thread's.
TEST(FmaPeak, TogetherIsAMeanPerCoreOfTheSameInstructions) {
    const auto one = measure_fma_peak(0.02);
    for (int threads : {1, 2, 3}) {
        const auto together = measure_fma_peak_together(threads, 0.02);
        EXPECT_EQ(together.vector_bits, one.vector_bits) << threads << " threads";
        EXPECT_TRUE(std::isfinite(together.gflops_per_core)) << threads << " threads";
        EXPECT_GT(together.gflops_per_core, 0.0) << threads << " threads";
    }
}

}  // namespace
