// Making a finished OUTPUT.partial the OUTPUT, durably: the data reaches the disk before the
// name does, and the name before we report success (or, run --fsync off, only the rename).
#include "attnbatch/error.hpp"
#include "attnbatch/io/output/fault_injection.hpp"
#include "attnbatch/io/output/output_paths.hpp"
#include "attnbatch/io/h5/file_paths.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace attnbatch::io {
namespace {

[[noreturn]] void io_failure(const std::string& path, const std::string& what) {
    throw Error(exit_io, path + ": " + what + ": " + std::strerror(errno));
}

void fsync_path(const std::string& path, int flags) {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
    if (fd < 0) io_failure(path, "cannot open for fsync");
    const int synced = ::fsync(fd);
    const int saved = errno;
    ::close(fd);
    errno = saved;
    if (synced != 0) io_failure(path, "fsync failed");
}

// rename() that fails with EEXIST instead of replacing; falls back to check-then-rename on
// file systems without RENAME_NOREPLACE.
int rename_no_replace(const std::string& from, const std::string& to) {
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) return -1;
    struct stat status {};
    if (::lstat(to.c_str(), &status) == 0) {
        errno = EEXIST;
        return -1;
    }
    return ::rename(from.c_str(), to.c_str());
}

}  // namespace

void publish_output(const std::string& output_path, bool force, bool fsync) {
    const std::string partial = partial_path_for(output_path);
    if (fsync) fsync_path(partial, O_RDONLY);
    fault_point("before_rename");
    const int renamed = force ? ::rename(partial.c_str(), output_path.c_str()) : rename_no_replace(partial, output_path);
    if (renamed != 0) {
        if (errno == EEXIST) {
            throw Error(exit_usage, output_path + " appeared while the run was going; the result stays in " +
                                              partial + "; hint: move it yourself, or rerun with --force");
        }
        io_failure(partial, "cannot rename to " + output_path);
    }
    if (fsync) fsync_path(directory_of(output_path), O_RDONLY | O_DIRECTORY);
}

}  // namespace attnbatch::io
