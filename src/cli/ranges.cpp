#include "ranges.hpp"

#include <cctype>
#include <sstream>

#include "attnbatch/error.hpp"

namespace attnbatch::cli {

namespace {

const char* const kSyntax = "expected n, A:B, :B, A: or a comma list of them (zero-based, B exclusive)";

[[noreturn]] void refuse(const std::string& option, const std::string& text, const std::string& why) {
    throw Error(exit_usage, option + ": '" + text + "' is not a range: " + why + "; " + kSyntax);
}

// Spaces around an item or a bound are allowed (" 1 : 3 "); spaces only make it empty.
std::string without_spaces_around(const std::string& text) {
    const std::size_t begin = text.find_first_not_of(' ');
    return begin == std::string::npos ? std::string() : text.substr(begin, text.find_last_not_of(' ') - begin + 1);
}

// What is wrong with `part` of `text`, naming the part only when it is not the whole text (a
// list's item, or a range's bound), so that '7:7' is not quoted twice.
[[noreturn]] void refuse_part(const std::string& option, const std::string& text, const std::string& part,
                              const std::string& what) {
    const std::string shown = without_spaces_around(part);
    const bool whole = without_spaces_around(text) == shown;
    refuse(option, text, whole ? "it " + what : "'" + shown + "' " + what);
}

// A bound: digits only (no sign, no spaces inside), below 2^62 so that B - A never overflows.
std::optional<std::int64_t> bound(const std::string& item, const std::string& option, const std::string& text) {
    const std::string digits = without_spaces_around(item);
    if (digits.empty()) return std::nullopt;
    if (digits[0] == '-') refuse_part(option, text, digits, "is negative (indices start at 0; no negative indexing)");
    std::int64_t value = 0;
    for (char c : digits) {
        if (!std::isdigit(static_cast<unsigned char>(c))) refuse_part(option, text, digits, "is not a number");
        if (value > (std::int64_t{1} << 58)) refuse_part(option, text, digits, "is too large");
        value = value * 10 + (c - '0');
    }
    return value;
}

}  // namespace

std::vector<IndexRange> parse_ranges(const std::string& text, const std::string& option) {
    std::vector<IndexRange> ranges;
    if (text == "all") return {IndexRange{}};
    std::string item;
    std::istringstream items(text);
    bool trailing_comma = !text.empty() && text.back() == ',';
    while (std::getline(items, item, ',')) {
        const std::size_t colon = item.find(':');
        if (colon == std::string::npos) {
            const std::optional<std::int64_t> n = bound(item, option, text);
            if (!n) refuse(option, text, "an empty item");
            ranges.push_back(IndexRange{*n, *n + 1});
            continue;
        }
        if (item.find(':', colon + 1) != std::string::npos) refuse_part(option, text, item, "has two colons (no steps)");
        const std::optional<std::int64_t> first = bound(item.substr(0, colon), option, text);
        const std::optional<std::int64_t> last = bound(item.substr(colon + 1), option, text);
        if (first && last && *last <= *first) {
            refuse_part(option, text, item, "is empty (B must be greater than A)");
        }
        ranges.push_back(IndexRange{first.value_or(0), last});
    }
    if (ranges.empty() || trailing_comma) refuse(option, text, "an empty item");
    return ranges;
}

IndexRange parse_block(const std::string& text, const std::string& option) {
    const std::vector<IndexRange> ranges = parse_ranges(text, option);
    if (ranges.size() != 1) {
        throw Error(exit_usage, option + ": '" + text + "' is a list, expected one block (n, A:B, :B or A:): the output "
                                             "holds consecutive sequences; hint: run once per block");
    }
    return ranges.front();
}

std::pair<std::int64_t, std::int64_t> resolve_block(const IndexRange& range, std::int64_t limit,
                                                    const std::string& option, const std::string& limit_name) {
    const std::int64_t last = range.last.value_or(limit);
    if (range.first >= limit || last > limit) {
        throw Error(exit_usage, option + " " + range_syntax(range.first, last) + " ends past " + limit_name + " = " +
                                    std::to_string(limit) + " (expected 0 <= A < B <= " + limit_name + ")");
    }
    return {range.first, last};
}

std::vector<std::int64_t> expand_ranges(const std::vector<IndexRange>& ranges, std::int64_t limit,
                                        const std::string& option, const std::string& limit_name) {
    std::vector<std::int64_t> indices;
    for (const IndexRange& range : ranges) {
        const auto [first, last] = resolve_block(range, limit, option, limit_name);
        for (std::int64_t i = first; i < last; ++i) indices.push_back(i);
    }
    return indices;
}

std::string format_range(std::int64_t first, std::int64_t last) {
    if (last == first + 1) return std::to_string(first);
    return "[" + std::to_string(first) + ", " + std::to_string(last) + ")";
}

std::string format_indices(const std::vector<std::int64_t>& indices) {
    std::string text;
    for (std::size_t i = 0; i < indices.size();) {
        std::size_t j = i + 1;
        while (j < indices.size() && indices[j] == indices[j - 1] + 1) ++j;
        text += (text.empty() ? "" : ", ") + format_range(indices[i], indices[j - 1] + 1);
        i = j;
    }
    return text;
}

std::string range_syntax(std::int64_t first, std::int64_t last) {
    return last == first + 1 ? std::to_string(first) : std::to_string(first) + ":" + std::to_string(last);
}

}  // namespace attnbatch::cli
