// The CPU clocks bench and the run report set beside their wall times (kernels/threads.hpp): a
// team's is the sum over the threads its parallel regions run on, a thread's is its own.
#include "attnbatch/kernels/threads.hpp"

#include <gtest/gtest.h>

namespace attnbatch::kernels {
namespace {

// Spins until the calling thread has used `seconds` of CPU, however often it is descheduled.
void burn(double seconds) {
    const double start = thread_cpu_seconds();
    volatile double sink = 1;
    while (thread_cpu_seconds() - start < seconds) sink = sink * 1.0000001 + 1e-9;
}

TEST(CpuTime, AThreadCountsItsOwnCpuOnly) {
    const double start = thread_cpu_seconds();
    burn(0.03);
    const double used = thread_cpu_seconds() - start;
    EXPECT_GE(used, 0.03);
    EXPECT_LT(used, 0.5);  // one thread's, not the process's (the suite runs beside it)
}

TEST(CpuTime, ATeamSumsEveryThreadItsRegionsRunOn) {
    constexpr int kThreads = 3;
    const double team_start = team_cpu_seconds(kThreads), own_start = thread_cpu_seconds();
    int ran = 0;
#if defined(_OPENMP)
#pragma omp parallel num_threads(kThreads) reduction(+ : ran)
#endif
    {
        burn(0.03);
        ran += 1;
    }
    const double team = team_cpu_seconds(kThreads) - team_start;
    const double own = thread_cpu_seconds() - own_start;
    ASSERT_EQ(ran, kThreads) << "the team was not given its threads";
    EXPECT_GE(own, 0.03);
    EXPECT_GE(team, 0.03 * kThreads) << "a team thread's CPU was not counted";
    EXPECT_GT(team, own + 0.03 * (kThreads - 1) - 1e-3);
}

}  // namespace
}  // namespace attnbatch::kernels
