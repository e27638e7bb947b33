// Putting a file's written rows on the disk while the run goes on, so that the fsync before
// publishing finds little left to do.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace attnbatch::io {

// Syncs a file's data (fdatasync) from a thread of its own, so that no round waits for the
// disk. fdatasync, not sync_file_range: starting the writes is not enough where the device
// keeps a volatile cache (a virtual disk on its host's page cache, a drive's write cache). Only
// a flush empties it, and left to the fsync before publication, 1.09 GB took 0.42-0.48 s
// there after the last compute; flushed round by round, the run went 1.42 -> 1.12 s
// (docs/performance-log.md). Best effort: the fsync at publication is the guarantee, so a failure
// (another system, a file system without it) is ignored.
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
