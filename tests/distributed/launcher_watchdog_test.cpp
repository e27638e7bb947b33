// The launcher watchdog against a stand-in launcher: a child process that never exits by
// itself, as mpirun stuck in its teardown, with children of its own that it never reaps. This
// test process plays the rank: closing the handle without a word is the rank being killed.
#include "attnbatch/distributed/launcher_watchdog.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace attnbatch::distributed {
namespace {

constexpr double kGrace = 0.5;

// A stand-in launcher and its one child: the child ends at once (a zombie, never reaped, as
// the ranks mpirun killed) or, with `child_lives`, waits until killed; the launcher waits for
// ever. `child` is set to the child's pid.
pid_t stuck_launcher(bool child_lives, pid_t& child) {
    int ends[2];
    if (::pipe(ends) != 0) return -1;
    const pid_t launcher = ::fork();
    if (launcher == 0) {
        const pid_t rank = ::fork();
        if (rank == 0) {
            if (child_lives) ::pause();
            ::_exit(0);
        }
        if (::write(ends[1], &rank, sizeof rank) != sizeof rank) ::_exit(1);
        for (;;) ::pause();
    }
    ::close(ends[1]);
    if (::read(ends[0], &child, sizeof child) != sizeof child) child = -1;
    ::close(ends[0]);
    return launcher;
}

// Whether `pid` (a child of this process) ended within `seconds`, and by which signal.
bool ends_within(pid_t pid, double seconds, int& signal) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
        int status = 0;
        if (::waitpid(pid, &status, WNOHANG) == pid) {
            signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
            return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

void end(pid_t launcher) {
    ::kill(launcher, SIGKILL);
    ::waitpid(launcher, nullptr, 0);
}

TEST(LauncherWatchdog, KillsALauncherThatOutlivesItsRanksByTheGrace) {
    pid_t rank = 0;
    const pid_t launcher = stuck_launcher(false, rank);
    ASSERT_GT(launcher, 0);
    const auto started = std::chrono::steady_clock::now();
    const int handle = start_launcher_watchdog({launcher, kGrace});
    ASSERT_GE(handle, 0);
    ::close(handle);  // this rank is gone without a word
    int signal = 0;
    const bool ended = ends_within(launcher, kGrace + 3.0, signal);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (!ended) end(launcher);
    ASSERT_TRUE(ended) << "the stuck launcher still runs " << kGrace + 3.0 << " s after its rank ended";
    EXPECT_EQ(signal, SIGKILL);
    EXPECT_GE(seconds, kGrace) << "killed before the grace was over";
}

TEST(LauncherWatchdog, LeavesTheLauncherAloneWhenTheRankEndsInOrder) {
    pid_t rank = 0;
    const pid_t launcher = stuck_launcher(false, rank);
    ASSERT_GT(launcher, 0);
    const int handle = start_launcher_watchdog({launcher, kGrace});
    ASSERT_GE(handle, 0);
    release_launcher_watchdog(handle);
    int signal = 0;
    const bool ended = ends_within(launcher, kGrace + 1.5, signal);
    if (!ended) end(launcher);
    EXPECT_FALSE(ended) << "the launcher of a rank that ended in order was killed (signal " << signal << ")";
}

TEST(LauncherWatchdog, WaitsWhileTheLauncherHasALiveChild) {
    pid_t rank = 0;
    const pid_t launcher = stuck_launcher(true, rank);
    ASSERT_GT(launcher, 0);
    ASSERT_GT(rank, 0);
    const int handle = start_launcher_watchdog({launcher, kGrace});
    ASSERT_GE(handle, 0);
    ::close(handle);
    int signal = 0;
    // Another rank still runs (as while mpirun sends its SIGTERM and SIGKILL, a second apart).
    bool ended = ends_within(launcher, kGrace + 1.5, signal);
    EXPECT_FALSE(ended) << "killed while one of its children was alive";
    ::kill(rank, SIGKILL);  // now it has none: a zombie is not alive
    if (!ended) ended = ends_within(launcher, kGrace + 3.0, signal);
    if (!ended) end(launcher);
    ASSERT_TRUE(ended) << "the launcher still runs " << kGrace + 3.0 << " s after its last child ended";
    EXPECT_EQ(signal, SIGKILL);
}

TEST(LauncherWatchdog, WatchesOnlyOpenMpisLauncher) {
    // This test's parent is ctest or a shell, not orterun or orted.
    EXPECT_EQ(open_mpi_launcher_watch().launcher, 0);
}

}  // namespace
}  // namespace attnbatch::distributed
