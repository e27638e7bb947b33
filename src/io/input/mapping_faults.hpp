// A mapped input file shortened during a run: one line and exit 4, not a bus error.
#pragma once

#include <cstddef>
#include <string>

namespace attnbatch::io::detail {

// Until forget_mapping(begin), a fault on [begin, begin + length), a mapping of `path` (its
// pages gone: the file shortened or rewritten since it was mapped), ends the process with one
// line naming the file and exit code 4 (I/O error) instead of the bus error's core dump.
// Faults elsewhere go to the handler that was there before. Best effort: beyond 64 mappings
// watched at once a mapping is not watched.
void watch_mapping(const void* begin, std::size_t length, const std::string& path) noexcept;
void forget_mapping(const void* begin) noexcept;

}  // namespace attnbatch::io::detail
