// The stop request and its agreement points, without MPI: the phase state and the handler
// (in forked children, as real signals end or do not end the process), the one-line message,
// and stop points and sliced phases on P ranks of the thread-based Comm.
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "attnbatch/distributed/stop_point.hpp"
#include "attnbatch/distributed/stop_request.hpp"
#include "attnbatch/error.hpp"
#include "support/thread_comm.hpp"

namespace attnbatch::distributed {
namespace {

using attnbatch::testing::run_ranks;

class StopTest : public ::testing::Test {
protected:
    void SetUp() override { clear_stop_request(); }
    void TearDown() override { clear_stop_request(); }
};

TEST_F(StopTest, TheMessageNamesTheSignalThePhaseAndWhatWasWritten) {
    EXPECT_EQ(stop_message(SIGTERM, Phase::value_scan, 0),
              "interrupted by SIGTERM during value scan after 0 sequences were written; resume with --resume");
    EXPECT_EQ(stop_message(SIGUSR1, Phase::rounds, 1200),
              "interrupted by SIGUSR1 during rounds after 1200 sequences were written; resume with --resume");
    EXPECT_EQ(stop_message(SIGINT, Phase::resume_verification, 7),
              "interrupted by SIGINT during resume verification after 7 sequences were written; resume with --resume");
}

TEST_F(StopTest, EveryPhaseHasItsOwnNameAndKey) {
    std::set<std::string> names, keys;
    for (int p = 0; p < kPhaseCount; ++p) {
        names.insert(name_of(static_cast<Phase>(p)));
        keys.insert(key_of(static_cast<Phase>(p)));
    }
    EXPECT_EQ(names.size(), static_cast<std::size_t>(kPhaseCount));
    EXPECT_EQ(keys.size(), static_cast<std::size_t>(kPhaseCount));
    EXPECT_EQ(names.count("?"), 0u);
    EXPECT_STREQ(name_of(Phase::start_up), "start-up");
    EXPECT_STREQ(key_of(Phase::final_flush), "final_flush");
}

TEST_F(StopTest, TheRequestRemembersThePhaseItCameIn) {
    enter_phase(Phase::lengths);
    request_stop(SIGUSR1);
    enter_phase(Phase::planning);
    request_stop(SIGTERM);  // not the first: ignored
    EXPECT_EQ(stop_signal(), SIGUSR1);
    EXPECT_EQ(stop_phase(), Phase::lengths);
    EXPECT_EQ(current_phase(), Phase::planning);
    EXPECT_GT(phase_entered_at(Phase::planning), 0.0);
    EXPECT_GE(phase_entered_at(Phase::planning), phase_entered_at(Phase::lengths));
}

TEST_F(StopTest, ASignalDuringTheLastAgreementCountsAsPastIt) {
    // Every rank voted no stop at the last stop point; this one's signal came during the vote.
    enter_phase(Phase::final_flush);
    request_stop(SIGTERM);
    EXPECT_EQ(stop_phase(), Phase::final_flush);
    pass_last_stop_point();
    EXPECT_EQ(current_phase(), Phase::publish);
    EXPECT_EQ(stop_signal(), SIGTERM);
    EXPECT_EQ(stop_phase(), Phase::publish);
}

TEST_F(StopTest, PassingTheLastStopPointWithoutASignalRecordsNone) {
    enter_phase(Phase::final_flush);
    pass_last_stop_point();
    EXPECT_EQ(current_phase(), Phase::publish);
    EXPECT_EQ(stop_signal(), 0);
}

// In forked children: what real signals do to the process.
using StopDeathTest = StopTest;

TEST_F(StopDeathTest, AFirstSignalIsARequestNotTheEnd) {
    EXPECT_EXIT(
        {
            install_stop_handlers();
            enter_phase(Phase::value_scan);
            std::raise(SIGTERM);
            std::_Exit(stop_signal() == SIGTERM && stop_phase() == Phase::value_scan ? 42 : 43);
        },
        ::testing::ExitedWithCode(42), "");
}

TEST_F(StopDeathTest, ASecondSignalEndsTheProcessAtOnceWithFive) {
    EXPECT_EXIT(
        {
            install_stop_handlers();
            enter_phase(Phase::rounds);
            std::raise(SIGUSR1);
            std::raise(SIGTERM);
            std::_Exit(43);
        },
        ::testing::ExitedWithCode(exit_interrupted), "");
}

TEST_F(StopDeathTest, ASecondSignalOncePublishedEndsWithZero) {
    EXPECT_EXIT(
        {
            install_stop_handlers();
            enter_phase(Phase::shut_down);
            std::raise(SIGINT);
            std::raise(SIGINT);
            std::_Exit(43);
        },
        ::testing::ExitedWithCode(exit_ok), "");
}

TEST_F(StopDeathTest, ASignalBlockedBeforeTheHandlersIsTakenWhenTheyAreInstalled) {
    // As a launcher may start the process: the signal arrives blocked, before main().
    EXPECT_EXIT(
        {
            sigset_t blocked;
            sigemptyset(&blocked);
            sigaddset(&blocked, SIGTERM);
            sigprocmask(SIG_BLOCK, &blocked, nullptr);
            std::raise(SIGTERM);
            const int before = stop_signal();
            install_stop_handlers();
            std::_Exit(before == 0 && stop_signal() == SIGTERM && stop_phase() == Phase::start_up ? 42 : 43);
        },
        ::testing::ExitedWithCode(42), "");
}

TEST_F(StopTest, AStopPointWithoutARequestLetsEveryRankOn) {
    run_ranks(3, [](Comm& comm) {
        stop_point(comm);
        begin_phase(comm, Phase::validation);
        comm.barrier();
    });
    EXPECT_EQ(current_phase(), Phase::validation);
}

TEST_F(StopTest, AStopRequestEndsEveryRankAtTheNextStopPoint) {
    std::vector<int> codes(3, 0);
    std::vector<std::string> messages(3);
    run_ranks(3, [&](Comm& comm) {
        begin_phase(comm, Phase::resume_verification);
        if (comm.rank() == 2) request_stop(SIGTERM);  // the flag is the process's: every rank sees it
        comm.barrier();
        try {
            begin_phase(comm, Phase::planning);
        } catch (const AgreedFailure& failure) {
            codes[static_cast<std::size_t>(comm.rank())] = failure.exit_code();
            messages[static_cast<std::size_t>(comm.rank())] = failure.what();
        }
    });
    for (std::size_t r = 0; r < 3; ++r) {
        EXPECT_EQ(codes[r], exit_interrupted) << "rank " << r;
        EXPECT_EQ(messages[r], stop_message(SIGTERM, Phase::resume_verification, 0)) << "rank " << r;
    }
    EXPECT_EQ(current_phase(), Phase::resume_verification);  // the next phase never began
}

TEST_F(StopTest, SlicesRunUntilDoneWithTheOtherRanksWaiting) {
    std::atomic<int> slices{0};
    run_ranks(4, [&](Comm& comm) {
        int mine = 0;
        agreed_in_slices(comm, comm.rank() == 0 || comm.rank() == 2, [&] {
            ++slices;
            return ++mine == (comm.rank() == 0 ? 5 : 2);
        });
    });
    EXPECT_EQ(slices.load(), 7);
}

TEST_F(StopTest, AStopBetweenSlicesEndsTheSlicedPhaseOnEveryRank) {
    std::atomic<int> slices{0};
    std::vector<int> codes(3, 0);
    run_ranks(3, [&](Comm& comm) {
        try {
            agreed_in_slices(comm, comm.is_root(), [&] {
                if (++slices == 2) request_stop(SIGUSR1);
                return slices == 1000;
            });
        } catch (const AgreedFailure& failure) {
            codes[static_cast<std::size_t>(comm.rank())] = failure.exit_code();
        }
    });
    EXPECT_EQ(slices.load(), 2);
    EXPECT_EQ(codes, std::vector<int>(3, exit_interrupted));
}

TEST_F(StopTest, AFailureInASliceEndsEveryRankWithItsCode) {
    std::vector<int> codes(3, 0);
    run_ranks(3, [&](Comm& comm) {
        int mine = 0;
        try {
            agreed_in_slices(comm, true, [&] {
                if (comm.rank() == 1 && ++mine == 3) throw Error(exit_invalid_input, "bad value");
                return false;
            });
        } catch (const AgreedFailure& failure) {
            codes[static_cast<std::size_t>(comm.rank())] = failure.exit_code();
            EXPECT_STREQ(failure.what(), "bad value");
        }
    });
    EXPECT_EQ(codes, std::vector<int>(3, exit_invalid_input));
}

}  // namespace
}  // namespace attnbatch::distributed
