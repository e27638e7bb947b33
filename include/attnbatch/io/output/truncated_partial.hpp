// A partial output cut short of the end its HDF5 superblock records. A write past a file-size
// limit (RLIMIT_FSIZE: EFBIG) or a crash can leave the file's last bytes unwritten while the
// superblock, written earlier, already counts them; HDF5 then refuses to open the file at all.
// Extended with zeros to that end, it opens, and the lost bytes read as zeros: the resume's
// checks (each done unit's checksum, each compressed chunk read back) find exactly the units
// they held and compute them again. When metadata itself was in the lost tail, opening or
// reading the file still fails, and the resume says the file cannot be continued.
#pragma once

#include <cstdint>
#include <string>

namespace attnbatch::io {

// How many bytes `partial` lacks before the end its superblock records: 0 for a file that is
// whole, or whose superblock this reader does not know (HDF5 then judges it on opening).
// Reads only; an Error (exit 4) when the file cannot be read.
std::uint64_t bytes_short_of_recorded_end(const std::string& partial);

// Extends `partial` with zeros to the end its superblock records and returns how many bytes it
// added (0 when it was not short). Only for a .partial a resume is about to continue: an input
// or a published output is never changed. An Error (exit 4) naming the file when it cannot be
// extended (the same file-size limit, a full disk).
std::uint64_t extend_to_recorded_end(const std::string& partial);

// Takes back the `added` bytes of extend_to_recorded_end, for a resume that then refuses the
// file (other input or options, lost metadata): a refusal leaves the file as it found it.
// Best effort: a failure here must not hide the refusal's own message.
void undo_extension(const std::string& partial, std::uint64_t added) noexcept;

}  // namespace attnbatch::io
