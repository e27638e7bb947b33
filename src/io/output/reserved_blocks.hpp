// Giving a new output file its blocks before any rank writes to it.
#pragma once

#include <string>

namespace attnbatch::io {

// Allocates the disk blocks under the whole of the file at `path` (its size as HDF5 left it,
// every early-allocated chunk included) as unwritten extents, without changing its size or
// contents. Why: on Linux's ext4 a write into a hole allocates its blocks under the inode's
// lock held exclusively, so two ranks' direct writes of one file take turns and a buffered
// write waits behind the other rank's direct write in flight; into allocated blocks, direct
// writes on block bounds share the lock (Linux 6.3 and later), and buffered ones skip the
// delayed allocation. Two ranks storing 1.1 GB of maps without sync: 0.61 s against 0.75 and
// 0.85 against 0.90 (medians of 9 and 11, Zen 4; a tie in a third sitting of 5,
// docs/performance-log.md); the durable mode ties. Best effort: a file system without
// fallocate(2), or one that runs out of space here, leaves the file as it was (the free-space
// preflight has already spoken, and a write that finds no space fails as it always did).
// fallocate(2), not posix_fallocate(3): where the file system lacks it, glibc's emulation
// writes every block, which here would double the output's writes.
void reserve_blocks(const std::string& path) noexcept;

}  // namespace attnbatch::io
