#include "attnbatch/distributed/launcher_watchdog.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <initializer_list>
#include <string>

namespace attnbatch::distributed {

namespace {

// Everything up to watch_launcher runs in the watchdog, forked from a rank that may already
// have threads (OpenMP's, a BLAS pool): async-signal-safe calls only, no allocation, no locks.

constexpr long kPollNanoseconds = 100'000'000;

// Builds text in a fixed buffer; what does not fit is cut.
struct Text {
    char data[256] = {};
    std::size_t size = 0;
    Text& add(const char* s) {
        while (*s != '\0' && size + 1 < sizeof data) data[size++] = *s++;
        data[size] = '\0';
        return *this;
    }
    Text& add(long long number) {
        char digits[24];
        int n = 0;
        unsigned long long value = number < 0 ? 0ULL - static_cast<unsigned long long>(number) : number;
        do digits[n++] = static_cast<char>('0' + value % 10); while ((value /= 10) != 0);
        if (number < 0) add("-");
        while (n > 0 && size + 1 < sizeof data) data[size++] = digits[--n];
        data[size] = '\0';
        return *this;
    }
};

// The first bytes of a /proc file, NUL-terminated; -1 when it cannot be read (gone).
ssize_t read_proc(const char* path, char* buffer, std::size_t capacity) {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    std::size_t total = 0;
    while (total + 1 < capacity) {
        const ssize_t n = ::read(fd, buffer + total, capacity - 1 - total);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        total += static_cast<std::size_t>(n);
    }
    ::close(fd);
    buffer[total] = '\0';
    return static_cast<ssize_t>(total);
}

// The decimal number at `p` (leading spaces skipped); `p` moves past it. False when none.
bool parse_number(const char*& p, unsigned long long& value) {
    while (*p == ' ' || *p == '\n') ++p;
    if (*p < '0' || *p > '9') return false;
    value = 0;
    while (*p >= '0' && *p <= '9') value = value * 10 + static_cast<unsigned>(*p++ - '0');
    return true;
}

struct ProcessState {
    char state = '?';                  // R, S, D, Z...
    unsigned long long start_time = 0;  // clock ticks after boot: with the pid, names one process
};

// False when `pid` is gone.
bool process_state(pid_t pid, ProcessState& out) {
    char stat[1024];
    if (read_proc(Text().add("/proc/").add(pid).add("/stat").data, stat, sizeof stat) <= 0) return false;
    const char* p = std::strrchr(stat, ')');  // the name before it may hold spaces and parentheses
    if (p == nullptr || p[1] == '\0') return false;
    p += 2;
    out.state = *p;
    // Field 3 is the state; the start time is field 22.
    for (int field = 3; field < 22; ++field) {
        p = std::strchr(p, ' ');
        if (p == nullptr) return false;
        ++p;
    }
    return parse_number(p, out.start_time);
}

bool ended(char state) { return state == 'Z' || state == 'X'; }

// Whether `parent` has a child that has not ended. Children are listed per thread (a launcher
// may fork from any of its threads); when the list cannot be read the answer is yes, and the
// launcher is left alone.
bool has_live_child(pid_t parent) {
    const int tasks = ::open(Text().add("/proc/").add(parent).add("/task").data, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (tasks < 0) return true;
    bool live = false, listed = false;
    alignas(8) static char entries[4096];
    static char children[65536];
    for (;;) {
        const long bytes = ::syscall(SYS_getdents64, tasks, entries, sizeof entries);
        if (bytes <= 0) break;
        for (long offset = 0; offset < bytes && !live;) {
            // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name
            unsigned short length = 0;
            std::memcpy(&length, entries + offset + 16, sizeof length);
            const char* name = entries + offset + 19;
            offset += length;
            if (name[0] < '0' || name[0] > '9') continue;
            if (read_proc(Text().add("/proc/").add(parent).add("/task/").add(name).add("/children").data, children,
                          sizeof children) < 0) {
                continue;
            }
            listed = true;
            const char* p = children;
            for (unsigned long long child = 0; !live && parse_number(p, child);) {
                ProcessState state;
                live = process_state(static_cast<pid_t>(child), state) && !ended(state.state);
            }
        }
        if (live) break;
    }
    ::close(tasks);
    return live || !listed;
}

double monotonic_seconds() {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// Closes the descriptors first..last (close_range where the kernel has it, 5.9 and later).
void close_range_of(unsigned first, unsigned last) {
    if (first > last) return;
#ifdef SYS_close_range
    if (::syscall(SYS_close_range, first, last, 0) == 0) return;
#endif
    rlimit limit{};
    const unsigned open_max = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < 65536 ? static_cast<unsigned>(limit.rlim_cur)
                                                                                                 : 65536;
    for (unsigned fd = first; fd <= last && fd < open_max; ++fd) ::close(static_cast<int>(fd));
}

// Closes every descriptor from 3 up except `keep_a` and `keep_b` (-1: none).
void close_all_but(int keep_a, int keep_b) {
    unsigned first = 3;
    for (const int keep : {std::min(keep_a, keep_b), std::max(keep_a, keep_b)}) {
        if (keep < static_cast<int>(first)) continue;
        close_range_of(first, static_cast<unsigned>(keep) - 1);
        first = static_cast<unsigned>(keep) + 1;
    }
    close_range_of(first, ~0U);
}

// The launcher kept on with no live child for the grace: tell whoever reads its stderr (the
// one line of this job's end anybody will see), then end it.
void end_stuck_launcher(const LauncherWatch& watch, int pidfd) {
    char name[64] = "the launcher";
    const ssize_t n = read_proc(Text().add("/proc/").add(watch.launcher).add("/comm").data, name, sizeof name);
    if (n > 0 && name[n - 1] == '\n') name[n - 1] = '\0';
    Text line;
    line.add("attnbatch run: error: ").add(name).add(" (pid ").add(watch.launcher).add(") still ran ")
        .add(static_cast<long long>(watch.grace_seconds + 0.5)).add(" s after its last rank had ended (Open MPI's "
        "teardown stuck after a rank was lost); ended it with SIGKILL; a .partial output stays at its last checkpoint "
        "for --resume\n");
    const int err = ::open(Text().add("/proc/").add(watch.launcher).add("/fd/2").data,
                           O_WRONLY | O_APPEND | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (err >= 0) {
        if (::write(err, line.data, line.size) < 0) {
            // Nobody reads it any more: the kill below is what matters.
        }
        ::close(err);
    }
#ifdef SYS_pidfd_send_signal
    if (pidfd >= 0 && ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0) == 0) return;
#endif
    (void)pidfd;
    ::kill(watch.launcher, SIGKILL);
}

[[noreturn]] void watch_launcher(int rank_end, const LauncherWatch& watch, unsigned long long launcher_start) {
    ::setsid();  // out of the rank's process group, which the launcher kills as a whole
    if (::chdir("/") != 0) {
        // Only so that no directory is kept busy; nothing depends on it.
    }
    ::prctl(PR_SET_NAME, "attnbatch-watch", 0, 0, 0);
    // The rank's stop handlers are not this process's: default actions, nothing blocked; a
    // launcher's stderr whose reader is gone must not end the watchdog before its kill.
    struct sigaction action {};
    action.sa_handler = SIG_DFL;
    for (int signal : {SIGTERM, SIGINT, SIGUSR1, SIGHUP}) ::sigaction(signal, &action, nullptr);
    action.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &action, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int pidfd = -1;
#ifdef SYS_pidfd_open
    pidfd = static_cast<int>(::syscall(SYS_pidfd_open, watch.launcher, 0));  // exact even if the pid is reused
#endif
    // The rank's stdout and stderr are pipes the launcher reads until every writer has closed
    // them: kept open here, they would hold up the very end this process guards.
    const int null = ::open("/dev/null", O_RDWR);
    for (int fd = 0; fd <= 2; ++fd) {
        if (null >= 0 && null != fd) ::dup2(null, fd);
    }
    close_all_but(rank_end, pidfd);

    char byte = 0;
    ssize_t n;
    do n = ::recv(rank_end, &byte, 1, 0);
    while (n < 0 && errno == EINTR);
    if (n == 1) ::_exit(0);  // the rank ended in order: the launcher ends the job as usual

    double childless_since = -1;
    for (;;) {
        ProcessState launcher;
        if (!process_state(watch.launcher, launcher) || launcher.start_time != launcher_start || ended(launcher.state)) {
            ::_exit(0);
        }
        const double now = monotonic_seconds();
        if (has_live_child(watch.launcher)) {
            childless_since = -1;
        } else if (childless_since < 0) {
            childless_since = now;
        } else if (now - childless_since >= watch.grace_seconds) {
            end_stuck_launcher(watch, pidfd);
            ::_exit(0);
        }
        timespec pause{0, kPollNanoseconds};
        while (::nanosleep(&pause, &pause) != 0 && errno == EINTR) {
        }
    }
}

}  // namespace

LauncherWatch open_mpi_launcher_watch() noexcept {
    LauncherWatch watch;
    const pid_t parent = ::getppid();
    if (parent <= 1) return watch;
    char target[PATH_MAX];
    const ssize_t n = ::readlink(Text().add("/proc/").add(parent).add("/exe").data, target, sizeof target - 1);
    if (n <= 0) return watch;
    target[n] = '\0';
    const char* slash = std::strrchr(target, '/');
    const std::string name = slash != nullptr ? slash + 1 : target;
    if (name != "orterun" && name != "orted") return watch;
    watch.launcher = parent;
    if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) {
        watch.grace_seconds += 0.25 * std::min(8, std::max(0, std::atoi(local)));
    }
    return watch;
}

int start_launcher_watchdog(const LauncherWatch& watch) noexcept {
    ProcessState launcher;
    if (watch.launcher <= 1 || !process_state(watch.launcher, launcher)) return -1;
    // A socket rather than a pipe: the rank's word is sent with MSG_NOSIGNAL, so a watchdog
    // that is gone costs no SIGPIPE; the rank's end, however it comes, is the end of the stream.
    int ends[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return -1;
    const pid_t middle = ::fork();
    if (middle < 0) {
        ::close(ends[0]);
        ::close(ends[1]);
        return -1;
    }
    if (middle == 0) {
        // The watchdog is the middle process's child, which leaves at once: so the watchdog is
        // nobody's child here (no zombie for the rank to reap) and outlives the rank.
        ::close(ends[1]);
        if (::fork() == 0) watch_launcher(ends[0], watch, launcher.start_time);
        ::_exit(0);
    }
    ::close(ends[0]);
    int status = 0;
    while (::waitpid(middle, &status, 0) < 0 && errno == EINTR) {
    }
    return ends[1];
}

void release_launcher_watchdog(int handle) noexcept {
    if (handle < 0) return;
    const char done = 1;
    while (::send(handle, &done, 1, MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
    ::close(handle);
}

}  // namespace attnbatch::distributed
