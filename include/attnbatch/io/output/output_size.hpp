// How big an output will be, and how much room its file system has, so the CLI can say the
// sizes before a run and refuse one that cannot fit.
#pragma once

#include "attnbatch/io/output/output_file.hpp"

#include <cstdint>
#include <string>

namespace attnbatch::io {

struct OutputSizes {
    std::uint64_t output = 0;     // /output
    std::uint64_t attention = 0;  // /attention (the attention maps; the usual giant: N*H*L*L)
    std::uint64_t lse = 0;        // /lse
    std::uint64_t lengths = 0;    // /lengths
    std::uint64_t offsets = 0;    // /offsets (the packed layout)
    std::uint64_t total() const noexcept { return output + attention + lse + lengths + offsets; }
};

// Uncompressed payload bytes (gzip can only shrink them; metadata adds a few KiB).
OutputSizes estimate_output_bytes(const OutputLayout& layout);

// Bytes an unprivileged user may still write on the file system holding `path` (a file
// that need not exist yet, or a directory). Error (exit 4) when it cannot be queried.
std::uint64_t free_bytes_at(const std::string& path);

}  // namespace attnbatch::io
