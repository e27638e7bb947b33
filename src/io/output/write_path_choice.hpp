// Which way a scratch run's whole chunks go to the file: through the page cache or past it.
#pragma once

#include <cstdint>

namespace attnbatch::io {

enum class WritePath { page_cache, direct };

// Without the final fsync (--fsync off) nothing has to reach the disk, so each write of whole
// chunks takes the way that has cost this process less per byte lately. Neither is always
// cheaper: the page cache is a copy at memory speed where the kernel has pages at hand, but
// where a virtual machine's host has taken freed memory back, every fresh page faults on the
// host and one file's buffered writers take turns (0.4-0.9 GB/s for two ranks, against 1.6-2
// for O_DIRECT, docs/performance.md); on a slow or shared disk with warm memory it is the other
// way round, and once dirty pages pass the kernel's limits a buffered write waits for the disk
// too. The costs are measured, not guessed: each way is tried once, then the cheaper one is
// taken, and the other is tried again (so that its cost stays current) once the writes since
// its last try have taken 1/kProbeShare times what a try is expected to cost. Trying then costs
// about that share of the time spent writing, however far apart the two ways are (trying every
// 8th write cost a third of a scratch run's writes here).
class WritePathChoice {
public:
    static constexpr double kProbeShare = 0.05;

    WritePath next() const noexcept;
    // A write of `bytes` the way `path` took `seconds` (from asking for the file to the bytes
    // in the kernel's hands).
    void record(WritePath path, std::uint64_t bytes, double seconds) noexcept;

private:
    WritePath cheaper() const noexcept;  // of two known costs

    // Seconds and bytes, each earlier write weighing half the one after it: the cost per byte
    // follows the memory and the disk as they change during a run, and one write is not all.
    struct Cost {
        double seconds = 0, bytes = 0;
        bool known() const noexcept { return bytes > 0; }
        double per_byte() const noexcept { return seconds / bytes; }
    };
    Cost costs_[2];
    double seconds_since_probe_ = 0;  // writing the cheaper way since the other was last tried
    double last_bytes_ = 0;
};

}  // namespace attnbatch::io
