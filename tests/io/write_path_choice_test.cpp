// How a scratch run picks the way its whole chunks go (src/io/output/write_path_choice.hpp):
// past the page cache until both ways are known, then the cheaper, and the other tried with a
// chunk at a bounded share of the time.
#include "output/write_path_choice.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace attnbatch::io {
namespace {

// Writes of four chunks, as OutputFile::write_whole_chunks makes them: a try of the other way
// takes the first chunk, the rest goes the usual way.
constexpr std::uint64_t kChunk = std::uint64_t{1} << 20;
constexpr std::uint64_t kWrite = 4 * kChunk;

struct Spent {
    double cached = 0, direct = 0;
    std::uint64_t cached_bytes = 0, direct_bytes = 0;
};
Spent drive(WritePathChoice& choice, int writes, double cached, double direct) {
    Spent spent;
    const auto write = [&](WritePath way, std::uint64_t bytes) {
        const double seconds = static_cast<double>(bytes) * (way == WritePath::direct ? direct : cached);
        choice.record(way, bytes, seconds);
        (way == WritePath::direct ? spent.direct : spent.cached) += seconds;
        (way == WritePath::direct ? spent.direct_bytes : spent.cached_bytes) += bytes;
    };
    for (int i = 0; i < writes; ++i) {
        std::uint64_t done = 0;
        if (choice.try_other(kChunk)) {
            write(choice.other(), kChunk);
            done = kChunk;
        }
        write(choice.usual(), kWrite - done);
    }
    return spent;
}

TEST(WritePathChoice, PastThePageCacheUntilBothWaysAreKnown) {
    WritePathChoice choice;
    EXPECT_EQ(choice.usual(), WritePath::direct);
    EXPECT_TRUE(choice.try_other(kChunk)) << "the page cache tried at the first write";
    choice.record(WritePath::page_cache, kChunk, 0.0001);
    EXPECT_EQ(choice.usual(), WritePath::direct) << "the disk's cost still unknown";
    choice.record(WritePath::direct, 3 * kChunk, 0.006);
    EXPECT_EQ(choice.usual(), WritePath::page_cache) << "the cheaper way once both are known";
    EXPECT_FALSE(choice.try_other(kChunk)) << "the disk just measured";
}

// Fresh pages on a virtual machine whose host took them back: the page cache at 1.5-100x the cost
// of the disk. After the first write, trying the page cache again takes about
// kTryShare / (1 + kTryShare) of the time, and it is still tried.
TEST(WritePathChoice, TheDearerWayTakesABoundedShareOfTheTime) {
    for (const double ratio : {1.5, 10.0, 100.0}) {
        WritePathChoice choice;
        drive(choice, 1, ratio * 1e-9, 1e-9);
        const Spent spent = drive(choice, 50000, ratio * 1e-9, 1e-9);
        const double share = spent.cached / (spent.cached + spent.direct);
        EXPECT_GT(spent.cached_bytes, 10 * kChunk) << "the page cache tried again, ratio " << ratio;
        // A try waits for 1/kTryShare of its expected cost, so the time after the last try is at
        // most one such wait: 5% slack covers it over this many writes.
        const double bound = WritePathChoice::kTryShare / (1 + WritePathChoice::kTryShare);
        EXPECT_LE(share, 1.05 * bound) << "ratio " << ratio;
        EXPECT_GE(share, 0.8 * bound) << "ratio " << ratio;
    }
}

TEST(WritePathChoice, FollowsTheCostsWhenTheyTurn) {
    WritePathChoice choice;
    drive(choice, 200, 1e-9, 3e-10);  // fresh memory: past the page cache is cheaper
    ASSERT_EQ(choice.usual(), WritePath::direct);
    // The memory warms (or the disk slows): after a few tries the page cache takes over.
    const Spent after = drive(choice, 300, 1e-10, 3e-10);
    EXPECT_GT(after.cached_bytes, 200 * kWrite);
    EXPECT_EQ(choice.usual(), WritePath::page_cache);
    // And back.
    const Spent back = drive(choice, 300, 1e-9, 3e-10);
    EXPECT_GT(back.direct_bytes, 200 * kWrite);
    EXPECT_EQ(choice.usual(), WritePath::direct);
}

TEST(WritePathChoice, EqualCostsKeepOneWayAndStillTryTheOther) {
    WritePathChoice choice;
    const Spent spent = drive(choice, 1000, 1e-9, 1e-9);
    EXPECT_GT(spent.cached_bytes, 5 * kChunk);
    EXPECT_GT(spent.direct_bytes, 5 * kChunk);
}

// Writes made past the page cache because the compute ran: their cost is learnt (it can make
// that way the usual one), but they are neither tries nor time spent the usual way, so the
// next try of the other way comes no sooner and no later for them.
TEST(WritePathChoice, WritesWhileComputingCountTheirCostOnly) {
    WritePathChoice choice;
    choice.record(WritePath::page_cache, kChunk, 1e-4);
    choice.record(WritePath::direct, 3 * kChunk, 6e-3);
    ASSERT_EQ(choice.usual(), WritePath::page_cache);
    ASSERT_FALSE(choice.try_other(kChunk));
    // However long the writes while computing take, they bring no try of the disk nearer.
    for (int i = 0; i < 100; ++i) choice.record(WritePath::direct, 4 * kChunk, 0.1, true);
    EXPECT_EQ(choice.usual(), WritePath::page_cache);
    EXPECT_FALSE(choice.try_other(kChunk)) << "time past the page cache while computing is not the usual way's";
    // The usual way's own time does (2 s of it, at its cheap rate).
    choice.record(WritePath::page_cache, 1024 * kChunk, 2.0);
    ASSERT_EQ(choice.usual(), WritePath::page_cache);
    EXPECT_TRUE(choice.try_other(kChunk));
    // And a cheap disk learnt while computing makes it the usual way.
    for (int i = 0; i < 20; ++i) choice.record(WritePath::direct, 4 * kChunk, 1e-6, true);
    EXPECT_EQ(choice.usual(), WritePath::direct);
}

}  // namespace
}  // namespace attnbatch::io
