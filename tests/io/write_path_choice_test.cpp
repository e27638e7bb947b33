// How a scratch run picks the way its whole chunks go (src/io/output/write_path_choice.hpp):
// both ways tried, the cheaper kept, the other tried again at a bounded share of the time.
#include "output/write_path_choice.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace attnbatch::io {
namespace {

constexpr std::uint64_t kBytes = std::uint64_t{4} << 20;

// Feeds `writes` writes of kBytes costing `cached` and `direct` seconds per byte, returns the
// seconds spent each way.
struct Spent {
    double cached = 0, direct = 0;
    std::uint64_t cached_writes = 0, direct_writes = 0;
};
Spent drive(WritePathChoice& choice, int writes, double cached, double direct) {
    Spent spent;
    for (int i = 0; i < writes; ++i) {
        const WritePath way = choice.next();
        const double seconds = static_cast<double>(kBytes) * (way == WritePath::direct ? direct : cached);
        choice.record(way, kBytes, seconds);
        (way == WritePath::direct ? spent.direct : spent.cached) += seconds;
        ++(way == WritePath::direct ? spent.direct_writes : spent.cached_writes);
    }
    return spent;
}

TEST(WritePathChoice, TriesThePageCacheThenTheDisk) {
    WritePathChoice choice;
    EXPECT_EQ(choice.next(), WritePath::page_cache);
    choice.record(WritePath::page_cache, kBytes, 0.004);
    EXPECT_EQ(choice.next(), WritePath::direct);
    choice.record(WritePath::direct, kBytes, 0.002);
    EXPECT_EQ(choice.next(), WritePath::direct) << "the cheaper way once both are known";
}

// Fresh pages on a virtual machine whose host took them back: the page cache at 1.5-100x the cost
// of the disk. After the first try of each way, trying the page cache again takes about
// kProbeShare / (1 + kProbeShare) of the time, and it is still tried.
TEST(WritePathChoice, TheDearerWayTakesABoundedShareOfTheTime) {
    for (const double ratio : {1.5, 10.0, 100.0}) {
        WritePathChoice choice;
        drive(choice, 2, ratio * 1e-9, 1e-9);
        const Spent spent = drive(choice, 50000, ratio * 1e-9, 1e-9);
        const double share = spent.cached / (spent.cached + spent.direct);
        EXPECT_GT(spent.cached_writes, 10u) << "the page cache tried again, ratio " << ratio;
        // A try waits for 1/kProbeShare of its expected cost, so the time after the last try is
        // at most one such wait: 5% slack covers it over this many writes.
        EXPECT_LE(share, 1.05 * WritePathChoice::kProbeShare / (1 + WritePathChoice::kProbeShare)) << "ratio " << ratio;
        EXPECT_GE(share, 0.8 * WritePathChoice::kProbeShare / (1 + WritePathChoice::kProbeShare)) << "ratio " << ratio;
    }
}

TEST(WritePathChoice, FollowsTheCostsWhenTheyTurn) {
    WritePathChoice choice;
    drive(choice, 200, 1e-9, 3e-10);  // cold memory: past the page cache is cheaper
    ASSERT_EQ(choice.next(), WritePath::direct);
    // The memory warms (or the disk slows): after a few tries the page cache takes over.
    const Spent after = drive(choice, 300, 1e-10, 3e-10);
    EXPECT_GT(after.cached_writes, 200u);
    EXPECT_EQ(choice.next(), WritePath::page_cache);
    // And back.
    const Spent back = drive(choice, 300, 1e-9, 3e-10);
    EXPECT_GT(back.direct_writes, 200u);
    EXPECT_EQ(choice.next(), WritePath::direct);
}

TEST(WritePathChoice, EqualCostsKeepOneWayAndStillTryTheOther) {
    WritePathChoice choice;
    const Spent spent = drive(choice, 1000, 1e-9, 1e-9);
    EXPECT_GT(spent.cached_writes, 5u);
    EXPECT_GT(spent.direct_writes, 5u);
}

}  // namespace
}  // namespace attnbatch::io
