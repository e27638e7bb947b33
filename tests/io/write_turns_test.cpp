// WriteTurns (src/io/output/write_turns.hpp): two writers of one file on a local file system
// take turns, the second sleeping until the first is done; where turns cannot be had they are
// skipped, never waited for.
#include "output/write_turns.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

namespace attnbatch::io {
namespace {

class WriteTurnsTest : public ::testing::Test {
protected:
    void SetUp() override {
        path_ = ::testing::TempDir() + "write_turns_" + std::to_string(::getpid()) + ".h5";
        std::ofstream(path_) << "data";
    }
    void TearDown() override { std::remove(path_.c_str()); }
    std::string path_;
};

TEST_F(WriteTurnsTest, SecondWriterWaitsForTheFirstTurn) {
    const WriteTurns first(path_), second(path_);
    if (!first.active()) GTEST_SKIP() << ::testing::TempDir() << " is not on a local file system with OFD locks";
    ASSERT_TRUE(second.active());
    std::atomic<bool> second_wrote{false};
    std::thread other;
    {
        const WriteTurns::Turn held(&first);
        other = std::thread([&] {
            const WriteTurns::Turn turn(&second);
            second_wrote = true;
        });
        // The other writer must still be waiting after a while longer than it needs to get
        // an uncontended turn (microseconds).
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        EXPECT_FALSE(second_wrote.load()) << "the second writer took a turn while the first held one";
    }
    other.join();
    EXPECT_TRUE(second_wrote.load());
}

TEST_F(WriteTurnsTest, NoTurnsWhereTheFileCannotBeOpened) {
    const WriteTurns turns(path_ + ".missing");
    EXPECT_FALSE(turns.active());
    const WriteTurns::Turn turn(&turns);  // returns at once
    const WriteTurns::Turn none(nullptr);
}

TEST(WriteTurnsFileSystem, NoTurnsOnAFileSystemThatIsNotLocal) {
    // /proc is neither of the local file systems whose writers share one node's inode lock.
    const WriteTurns turns("/proc/self/comm");
    EXPECT_FALSE(turns.active());
}

}  // namespace
}  // namespace attnbatch::io
