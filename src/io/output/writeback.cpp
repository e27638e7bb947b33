#include "output/writeback.hpp"

#include <fcntl.h>
#include <unistd.h>

namespace attnbatch::io {

void start_writeback(const std::string& path) noexcept {
#if defined(__linux__)
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    (void)::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    ::close(fd);
#else
    (void)path;
#endif
}

}  // namespace attnbatch::io
