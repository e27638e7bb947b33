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
// for O_DIRECT, docs/performance-log.md); on a slow or shared disk with warm memory it is the other
// way round, and once dirty pages pass the kernel's limits a buffered write waits for the disk
// too. The costs are measured, not guessed. Most bytes go the usual way: past the page cache
// until both costs are known (it takes no core from compute), then the one that has cost less
// per byte lately. The other way is tried with a little of a write (kTryBytes) at the first write
// and again once the writes since its last try have taken 1/kTryShare times what a try is
// expected to cost, so trying costs about that share of the writing time however far apart the
// two ways are. (Trying it with every 8th whole write cost a third of a scratch run's writes
// here, and 5% of the time with whole writes still made the run 13% slower than writing past
// the page cache alone: on fresh memory a buffered write is mostly the core's own time, taken
// from the compute that shares the core.)
//
// What costs less per byte is not the whole question while the rank computes: a buffered write
// is a copy on a core, most often the one its compute runs on (the I/O thread shares it), and a
// write past the page cache is the disk's DMA. So while a step computes, whole chunks go past
// the page cache in pieces (kComputingPiece), none of it counted against the usual way or its
// tries; once the compute is done (the I/O thread is all that runs) the rest goes the cheaper
// way. N=256 L=1024 with all maps, two ranks, 11 alternating runs: 0.70-0.71 s against 0.83-0.84
// choosing by cost alone (twice); other cases unchanged. Among bench_e2e.sh's other writers
// (whose dirty pages the disk writes back meanwhile) neither way won (docs/performance-log.md).
class WritePathChoice {
public:
    static constexpr double kTryShare = 0.02;
    // The bytes (at least a chunk) written past the page cache between looks at the compute.
    static constexpr std::uint64_t kComputingPiece = std::uint64_t{4} << 20;
    // The bytes a try of the other way takes (whole chunks, at least one, at most the write's
    // rest). Enough that a try measures the way and not one wait: a buffered write into the file
    // that another rank is writing past the page cache costs about 2 ms more now and then (most
    // likely the inode's lock, held through the other's direct write in flight), so tries of one
    // chunk (1 MiB in the N=256 L=1024 case) cost 2.1-2.9 ns per byte whether the page cache was
    // warm (0.36-0.40 ns/B for its 4 MiB writes) or fresh (about 2.5), against 1 ns/B past it, and
    // the page cache was never chosen. Zen 4 (docs/performance-log.md), 2026-12-07: that case
    // without sync 0.702 s against 0.935, medians of 9 interleaved; on fresh memory (4 s idle
    // before each run) 1.146 against 1.108, a try at the fresh page cache's rate.
    static constexpr std::uint64_t kTryBytes = std::uint64_t{8} << 20;

    WritePath usual() const noexcept;
    WritePath other() const noexcept { return usual() == WritePath::direct ? WritePath::page_cache : WritePath::direct; }
    // Whether the next write tries other() with `bytes` of its bytes first.
    bool try_other(std::uint64_t bytes) const noexcept;
    // A write of `bytes` the way `path` took `seconds` (from asking for the file to the bytes
    // in the kernel's hands); `while_computing`: made past the page cache because the compute
    // ran, so its cost counts but it is neither a try nor time spent the usual way.
    void record(WritePath path, std::uint64_t bytes, double seconds, bool while_computing = false) noexcept;

private:
    // Seconds and bytes, each earlier write weighing half the one after it: the cost per byte
    // follows the memory and the disk as they change during a run, and one write is not all.
    struct Cost {
        double seconds = 0, bytes = 0;
        bool known() const noexcept { return bytes > 0; }
        double per_byte() const noexcept { return seconds / bytes; }
    };
    Cost costs_[2];
    double seconds_since_try_ = 0;  // writing the usual way since the other was last tried
};

}  // namespace attnbatch::io
