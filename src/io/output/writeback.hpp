// Starting the disk write of a file's dirty pages early, so that the fsync before publishing
// finds little left to write.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace attnbatch::io {

// Asks the kernel to start writing a file's dirty pages to the disk (Linux sync_file_range),
// from a thread of its own: the call blocks while the device's queue is full, which on a slow
// disk held the round that asked. Best effort: the fsync at publication is the guarantee, so a
// failure (another system, a file system without it) is ignored.
class Writeback {
public:
    explicit Writeback(const std::string& path) noexcept;  // opens the file once
    ~Writeback();                                          // waits for the writeback it started
    Writeback(const Writeback&) = delete;
    Writeback& operator=(const Writeback&) = delete;

    // Returns at once; requests made while one runs are merged into the next.
    void start() noexcept;

private:
    void loop() noexcept;

    int fd_ = -1;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool requested_ = false, stopping_ = false;
    std::thread thread_;
};

}  // namespace attnbatch::io
