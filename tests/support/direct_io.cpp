#include "support/direct_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <new>

namespace attnbatch::testing {

bool takes_direct_io(const std::string& directory) {
    // Named by process: ranks of one test probe the same directory at once.
    const std::string probe = directory + "/direct_io_probe." + std::to_string(::getpid());
    const int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_DIRECT | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);
    ::unlink(probe.c_str());
    return fd >= 0;
}

PageAlignedFloats page_aligned_floats(std::size_t count) {
    constexpr std::size_t page = 4096;
    void* p = std::aligned_alloc(page, (count * sizeof(float) + page - 1) / page * page);
    if (p == nullptr) throw std::bad_alloc();
    return PageAlignedFloats(static_cast<float*>(p));
}

}  // namespace attnbatch::testing
