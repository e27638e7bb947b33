// The progress journal inside OUTPUT.partial, which is what makes --resume possible:
//   /journal/unit_bounds  int64 [U+1]  unit u holds sequences [bounds[u], bounds[u+1])
//   /journal/unit_rows    int64 [U+1], only when a unit is a piece of a sequence: unit u then
//                         runs from row rows[u] of sequence bounds[u] to row rows[u+1] of
//                         sequence bounds[u+1] (row 0 of a sequence being its start), so a
//                         piece of sequence s covers rows [r, r') of s and ends at (s, r') or,
//                         holding s's last row, at (s + 1, 0)
//   /journal/progress     int64 [U, 2] (done, checksum): done becomes 1 only after the
//                         unit's data was flushed; checksum is XXH3-64 of the unit's bytes
//                         in /output, /lse, /lengths and /attention, in that order (the
//                         canonical layout of output_file.hpp's OutputBlock)
//   /journal/identity     string, attribute `hash`: "key = value" lines (input, options)
//                         that a resumed run must match
// A run flushes its data, then records those units as done, then flushes again: after a
// crash at any point a unit marked done has its data on disk, and resuming redoes at most
// the units that were in flight. The checksums catch what a flush cannot promise (a write
// lost by the storage below, a file damaged since).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace attnbatch::io {

struct OutputLayout;  // output_file.hpp
struct OutputBlock;
struct OutputSpan;

struct JournalPlan {
    std::vector<std::int64_t> unit_bounds;  // U+1 ascending sequence indices, 0 to N
    std::string identity;                   // "key = value\n" lines
    std::vector<std::int64_t> unit_rows = {};  // U+1 rows of those positions; empty: all 0 (no piece)
};

struct JournalState {
    JournalPlan plan;
    std::vector<std::int64_t> done;       // [U], 0 or 1
    std::vector<std::int64_t> checksums;  // [U], valid where done
    std::int64_t done_units() const;
};

// XXH3-64 of the unit [first, last) of `block`, whose sequences start at `block_first` (its
// attention at max(block_first, A), as OutputBlock describes).
std::uint64_t unit_checksum(const OutputLayout& layout, std::int64_t first, std::int64_t last,
                            std::int64_t block_first, const OutputBlock& block);

// XXH3-64 of the unit `unit` of `block`, which holds the span `block_span` in the canonical
// layout of output_file.hpp (any layout, whole sequences or pieces; for padded whole sequences the
// same value as unit_checksum()).
std::uint64_t span_checksum(const OutputLayout& layout, const OutputSpan& unit, const OutputSpan& block_span,
                            const OutputBlock& block);

// XXH3-64 of bytes or of a text, as 16 hex digits.
std::string hash_hex(const void* data, std::size_t bytes);
inline std::string hash_text(const std::string& text) { return hash_hex(text.data(), text.size()); }

// "key = value" lines into a map (later lines win; lines without " = " are ignored).
std::map<std::string, std::string> identity_fields(const std::string& identity);

// What differs between a recorded and a current identity: "key: recorded A, now B" items
// joined with "; ", empty when they match.
std::string identity_differences(const std::string& recorded, const std::string& current);

}  // namespace attnbatch::io
