#include "output/reserved_blocks.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace attnbatch::io {

void reserve_blocks(const std::string& path) noexcept {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat status {};
    if (::fstat(fd, &status) == 0 && status.st_size > 0) {
        (void)::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, status.st_size);
    }
    ::close(fd);
}

}  // namespace attnbatch::io
