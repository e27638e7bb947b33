#include "attnbatch/io/output/truncated_partial.hpp"

#include "attnbatch/error.hpp"
#include "attnbatch/io/h5/superblock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

namespace attnbatch::io {
namespace {

std::uint64_t size_of(const std::string& path) {
    struct stat status {};
    if (::stat(path.c_str(), &status) != 0) {
        throw Error(exit_io, path + ": cannot stat it (" + std::strerror(errno) + ")");
    }
    return static_cast<std::uint64_t>(status.st_size);
}

}  // namespace

std::uint64_t bytes_short_of_recorded_end(const std::string& partial) {
    const std::optional<std::uint64_t> end = recorded_end_of_file(partial);
    const std::uint64_t size = size_of(partial);
    return end && *end > size ? *end - size : 0;
}

std::uint64_t extend_to_recorded_end(const std::string& partial) {
    const int fd = ::open(partial.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) throw Error(exit_io, partial + ": cannot open it to continue it (" + std::strerror(errno) + ")");
    // A run still writing the file holds HDF5's lock, and its file may be short of the end
    // its superblock records only for a moment: left alone, HDF5's own open then says who
    // holds it. The lock taken here also keeps such a run from starting while the file grows.
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        ::close(fd);
        return 0;
    }
    // The end read once, from the file now locked: the file's size and the bytes it lacks follow.
    std::optional<std::uint64_t> end;
    try {
        end = recorded_end_of_file(partial);
    } catch (...) {
        ::close(fd);
        throw;
    }
    struct stat status {};
    const std::uint64_t size = ::fstat(fd, &status) == 0 ? static_cast<std::uint64_t>(status.st_size) : 0;
    const std::uint64_t missing = end && *end > size ? *end - size : 0;
    // Growing the file adds a hole that reads as zeros: nothing is written, so a full disk
    // does not stop it, while the size limit that cut the file short still does.
    const int failed = missing > 0 && ::ftruncate(fd, static_cast<off_t>(*end)) != 0 ? errno : 0;
    ::close(fd);
    if (failed != 0) {
        throw Error(exit_io, partial + ": cannot extend it with zeros to the " + std::to_string(*end) +
                                 " bytes its superblock records (" + std::strerror(failed) + ")" +
                                 (failed == EFBIG ? "; hint: the file-size limit (ulimit -f) that cut it short must allow "
                                                    "its whole size, or run with --force instead of --resume to start afresh"
                                                  : "; hint: run with --force instead of --resume to discard it and start afresh"));
    }
    return missing;
}

void undo_extension(const std::string& partial, std::uint64_t added) noexcept {
    if (added == 0) return;
    struct stat status {};
    if (::stat(partial.c_str(), &status) != 0 || static_cast<std::uint64_t>(status.st_size) < added) return;
    [[maybe_unused]] const int ignored = ::truncate(partial.c_str(), static_cast<off_t>(status.st_size - added));
}

}  // namespace attnbatch::io
