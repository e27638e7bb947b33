// The count options whose default is a word (--block-q, --block-k and --unit-sequences: auto;
// bench --check: off). Their help shows the default as that word, so it is a value they take,
// on the command line, in a --config file and in an ATTNBATCH_* variable alike; 0 means the
// same, as it always did.
#pragma once

#include <boost/any.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnbatch::cli {

struct AutoCount {
    std::int64_t value = 0;  // 0: auto
    bool is_auto() const noexcept { return value == 0; }
};

// Boost.Program_options' hook for AutoCount values (found by argument-dependent lookup): "auto"
// or a whole number that fits 64 bits, signs allowed (the option's own check names the range it
// takes); anything else is an error naming the option, the text and what it takes.
void validate(boost::any& out, const std::vector<std::string>& tokens, AutoCount*, int);

// "auto" or the number, as --print-config shows it.
std::string to_string(AutoCount count);

// The whole number `text` spells (decimal, an optional '-', nothing around it), or none; for the
// options whose word is other than auto (bench --check off).
std::optional<std::int64_t> whole_number(const std::string& text);

}  // namespace attnbatch::cli
