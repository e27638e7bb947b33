#include "output/writeback.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <system_error>

namespace attnbatch::io {

Writeback::Writeback(const std::string& path) noexcept {
#if defined(__linux__)
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
#else
    (void)path;
#endif
}

Writeback::~Writeback() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
}

void Writeback::start() noexcept {
    if (fd_ < 0) return;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        requested_ = true;
    }
    if (!thread_.joinable()) {
        try {
            thread_ = std::thread([this] { loop(); });
        } catch (const std::system_error&) {  // no thread to spare: only start the writes here
            std::lock_guard<std::mutex> lock(mutex_);
            requested_ = false;
#if defined(__linux__)
            (void)::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE);
#endif
            return;
        }
    }
    wake_.notify_all();
}

void Writeback::loop() noexcept {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
        wake_.wait(lock, [this] { return stopping_ || requested_; });
        if (!requested_) return;  // stopping, nothing asked
        requested_ = false;
        lock.unlock();
#if defined(__linux__)
        (void)::fdatasync(fd_);
#endif
        lock.lock();
    }
}

}  // namespace attnbatch::io
