// The run report's CPU clocks (distributed/cpu_clocks.hpp): the system's share read beside the
// exact total, and kept within it, for a thread and for an OpenMP team.
#include "attnbatch/distributed/cpu_clocks.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>

namespace attnbatch::distributed {
namespace {

TEST(CpuClocks, TheSystemShareStaysWithinTheTotal) {
    const CpuSeconds start{2.0, 1.0};
    const CpuSeconds later{2.5, 1.8};  // ticks put more system time in the interval than it had
    EXPECT_DOUBLE_EQ(later.since(start).total, 0.5);
    EXPECT_DOUBLE_EQ(later.since(start).system, 0.5);
    const CpuSeconds clock_behind = CpuSeconds{2.0, 1.0}.since({2.5, 1.2});
    EXPECT_DOUBLE_EQ(clock_behind.total, 0.0);
    const CpuSeconds ticks_behind = CpuSeconds{3.0, 1.0}.since({2.0, 1.2});
    EXPECT_DOUBLE_EQ(ticks_behind.system, 0.0);
}

// Arithmetic is the program's own time: the system's share of a loop that makes no system
// call and touches no new page is next to nothing.
TEST(CpuClocks, ArithmeticIsNotSystemTime) {
    const CpuSeconds start = thread_cpu_times();
    volatile double sink = 1;
    while (thread_cpu_times().since(start).total < 0.05) {
        for (int i = 0; i < 10000; ++i) sink = sink * 1.0000001 + 1e-9;
    }
    const CpuSeconds used = thread_cpu_times().since(start);
    EXPECT_GE(used.total, 0.05);
    EXPECT_LT(used.system, used.total / 2) << "total " << used.total;
}

// Fresh pages are the system's work: a byte written into each 4 KiB page of 64 MiB of new
// memory costs the kernel a page fault each. (On a paravirtualised guest part of that cost is
// charged to the program instead: the share is only said to be there.)
TEST(CpuClocks, FirstTouchesOfFreshMemoryTakeSystemTime) {
    constexpr std::size_t kBytes = std::size_t{64} << 20, kPage = 4096;
    const std::unique_ptr<char[]> memory(new char[kBytes]);  // not value-initialised: untouched
    volatile char* const bytes = memory.get();
    const CpuSeconds start = team_cpu_times(1);
    for (std::size_t at = 0; at < kBytes; at += kPage) bytes[at] = 1;
    const CpuSeconds fresh = team_cpu_times(1).since(start);
    EXPECT_GT(fresh.system, 0.0) << "total " << fresh.total;
    EXPECT_LE(fresh.system, fresh.total);
    const CpuSeconds thread = thread_cpu_times();
    EXPECT_GE(thread.total, fresh.total);
    EXPECT_GE(thread.system, fresh.system);
}

}  // namespace
}  // namespace attnbatch::distributed
