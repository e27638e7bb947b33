// The CPU clocks bench and the run report set beside their wall times (kernels/threads.hpp): a
// team's is the sum over the threads its parallel regions run on, a thread's is its own.
#include "attnbatch/kernels/threads.hpp"

#include <gtest/gtest.h>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace attnbatch::kernels {
namespace {

// Spins until the calling thread has used `seconds` of CPU, however often it is descheduled.
void burn(double seconds) {
    const double start = thread_cpu_times().total;
    volatile double sink = 1;
    while (thread_cpu_times().total - start < seconds) sink = sink * 1.0000001 + 1e-9;
}

TEST(CpuTime, AThreadCountsItsOwnCpuOnly) {
    const CpuSeconds start = thread_cpu_times();
    burn(0.03);
    const CpuSeconds used = thread_cpu_times().since(start);
    EXPECT_GE(used.total, 0.03);
    EXPECT_LT(used.total, 0.5);  // one thread's, not the process's (the suite runs beside it)
    EXPECT_GE(used.system, 0.0);
    EXPECT_LE(used.system, used.total);
}

TEST(CpuTime, ATeamSumsEveryThreadItsRegionsRunOn) {
    constexpr int kThreads = 3;
    const CpuSeconds team_start = team_cpu_times(kThreads), own_start = thread_cpu_times();
    int ran = 0;
#if defined(_OPENMP)
#pragma omp parallel num_threads(kThreads) reduction(+ : ran)
#endif
    {
        burn(0.03);
        ran += 1;
    }
    const double team = team_cpu_times(kThreads).since(team_start).total;
    const double own = thread_cpu_times().since(own_start).total;
    ASSERT_EQ(ran, kThreads) << "the team was not given its threads";
    EXPECT_GE(own, 0.03);
    EXPECT_GE(team, 0.03 * kThreads) << "a team thread's CPU was not counted";
    EXPECT_GT(team, own + 0.03 * (kThreads - 1) - 1e-3);
}

TEST(CpuTime, TheSystemShareStaysWithinTheTotal) {
    const CpuSeconds start{2.0, 1.0};
    const CpuSeconds later{2.5, 1.8};  // ticks put more system time in the interval than it had
    EXPECT_DOUBLE_EQ(later.since(start).total, 0.5);
    EXPECT_DOUBLE_EQ(later.since(start).system, 0.5);
    const CpuSeconds clock_behind = CpuSeconds{2.0, 1.0}.since({2.5, 1.2});
    EXPECT_DOUBLE_EQ(clock_behind.total, 0.0);
    const CpuSeconds ticks_behind = CpuSeconds{3.0, 1.0}.since({2.0, 1.2});
    EXPECT_DOUBLE_EQ(ticks_behind.system, 0.0);
}

}  // namespace
}  // namespace attnbatch::kernels
