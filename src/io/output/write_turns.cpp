#include "output/write_turns.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#if defined(__linux__)
#include <linux/magic.h>
#include <sys/vfs.h>
#endif

namespace attnbatch::io {

namespace {

#if defined(__linux__) && defined(F_OFD_SETLKW)
// File systems whose writers are all on this node, and whose buffered writes to one file take
// its inode lock one at a time.
bool local_file_system(int fd) noexcept {
    struct statfs info {};
    if (::fstatfs(fd, &info) != 0) return false;
    switch (static_cast<unsigned long>(info.f_type)) {
        case EXT4_SUPER_MAGIC:  // also ext2 and ext3
        case XFS_SUPER_MAGIC:
        case BTRFS_SUPER_MAGIC:
        case TMPFS_MAGIC:
        case F2FS_SUPER_MAGIC:
            return true;
        default:
            return false;
    }
}

// The locked byte: past the largest offset a file can have on these file systems, so that no
// other lock on the file's data (an MPI-IO layer's, say) can overlap it.
constexpr off_t kTurnByte = static_cast<off_t>(INT64_MAX - 1);

bool set_lock(int fd, short type) noexcept {
    struct flock lock {};
    lock.l_type = type;
    lock.l_whence = SEEK_SET;
    lock.l_start = kTurnByte;
    lock.l_len = 1;
    while (::fcntl(fd, F_OFD_SETLKW, &lock) != 0) {
        if (errno != EINTR) return false;  // a stop signal's handler ran: the turn is still wanted
    }
    return true;
}
#endif

}  // namespace

WriteTurns::WriteTurns(const std::string& path) noexcept {
#if defined(__linux__) && defined(F_OFD_SETLKW)
    // A write lock needs a descriptor open for writing; it writes nothing.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    if (!local_file_system(fd) || !set_lock(fd, F_WRLCK) || !set_lock(fd, F_UNLCK)) {
        ::close(fd);
        return;
    }
    fd_ = fd;
#else
    (void)path;
#endif
}

WriteTurns::~WriteTurns() {
    if (fd_ >= 0) ::close(fd_);
}

WriteTurns::Turn::Turn(const WriteTurns* turns) noexcept {
#if defined(__linux__) && defined(F_OFD_SETLKW)
    if (turns != nullptr && turns->fd_ >= 0 && set_lock(turns->fd_, F_WRLCK)) fd_ = turns->fd_;
#else
    (void)turns;
#endif
}

WriteTurns::Turn::~Turn() {
#if defined(__linux__) && defined(F_OFD_SETLKW)
    if (fd_ >= 0) (void)set_lock(fd_, F_UNLCK);
#endif
}

}  // namespace attnbatch::io
