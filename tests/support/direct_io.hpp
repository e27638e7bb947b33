// For tests of writes past the page cache (O_DIRECT): whether a directory's file system takes
// them, and page-aligned buffers to write from.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <string>

namespace attnbatch::testing {

// Opens (and removes) a file of its own in `directory` with O_DIRECT: false where the file
// system refuses it (tmpfs before Linux 6.6), and the writes must then go through the page cache.
bool takes_direct_io(const std::string& directory);

struct FreeAligned {
    void operator()(float* p) const { std::free(p); }
};
using PageAlignedFloats = std::unique_ptr<float[], FreeAligned>;

// `count` floats starting on a page bound (the buffer rounded up to whole pages).
PageAlignedFloats page_aligned_floats(std::size_t count);

}  // namespace attnbatch::testing
