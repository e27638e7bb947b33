// The end of an HDF5 file as its superblock records it, read from the bytes themselves. A
// write cut short by a file-size limit (RLIMIT_FSIZE: EFBIG) or a crash can leave a file
// shorter than that end; HDF5 then refuses to open it at all ("truncated file"), although
// everything below the cut may be whole. Reading the superblock without HDF5 is the only way
// to learn by how much the file is short.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace attnbatch::io {

// The end-of-file address recorded by the superblock of the HDF5 file at `path` (formats 0
// and 1, 2 and 3; the signature searched at 0, 512, 1024, 2048, ... as HDF5 does, past a user
// block), as HDF5 compares it with the file's size when it opens the file: a file shorter than
// it is truncated. nullopt when the file holds no superblock this reader knows (not HDF5, a
// newer format, or offsets wider than 8 bytes). An Error (exit 4) when the file cannot be read.
std::optional<std::uint64_t> recorded_end_of_file(const std::string& path);

}  // namespace attnbatch::io
