// RANGE, the one way every subcommand chooses sequences or heads (run --sequences,
// --weights-seqs, weights --sequences and --heads): zero-based and half-open, as in Python,
//   n      the index n alone
//   A:B    A <= i < B
//   :B     0 <= i < B
//   A:     A <= i < the end (N sequences, H heads)
//   :      everything (also spelt "all")
// and comma lists of those ("0:4,7,9:"). Pure string code: the limit (N or H) is applied
// by whoever knows it. Ranges are printed the same way everywhere: "[A, B)", or "n" for one
// index.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnbatch::cli {

// [first, last); no last: up to the end.
struct IndexRange {
    std::int64_t first = 0;
    std::optional<std::int64_t> last;
};

// The items of a RANGE in the order given. Error (exit 2) naming `option` when the text is
// not a RANGE: negative or non-numeric bounds, B <= A, empty items.
std::vector<IndexRange> parse_ranges(const std::string& text, const std::string& option);

// One block only (run --sequences and --weights-seqs: the output holds consecutive
// sequences); a list is refused with that reason.
IndexRange parse_block(const std::string& text, const std::string& option);

// [first, last) with an open end resolved to `limit`; Error (exit 2) when it reaches past
// `limit` ("--sequences 90:110 ends past N = 100").
std::pair<std::int64_t, std::int64_t> resolve_block(const IndexRange& range, std::int64_t limit,
                                                    const std::string& option, const std::string& limit_name);

// Every index of the ranges, in order, each below `limit` (same error as resolve_block).
std::vector<std::int64_t> expand_ranges(const std::vector<IndexRange>& ranges, std::int64_t limit,
                                        const std::string& option, const std::string& limit_name);

// "[A, B)"; "n" when the range holds one index.
std::string format_range(std::int64_t first, std::int64_t last);
// Consecutive runs of `indices` as format_range items joined by ", ": "[0, 4), 7, [9, 12)".
std::string format_indices(const std::vector<std::int64_t>& indices);
// The text as a user types it back: "A:B".
std::string range_syntax(std::int64_t first, std::int64_t last);

}  // namespace attnbatch::cli
