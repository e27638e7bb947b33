// Starting the disk write of a file's dirty pages early, so that the fsync before publishing
// finds little left to write.
#pragma once

#include <string>

namespace attnbatch::io {

// Asks the kernel to start writing `path`'s dirty pages to the disk now, without waiting for
// them (Linux sync_file_range). Best effort: the fsync at publication is the guarantee, so a
// failure (another system, a file system without it) is ignored.
void start_writeback(const std::string& path) noexcept;

}  // namespace attnbatch::io
