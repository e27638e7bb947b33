#include "auto_count.hpp"

#include <boost/program_options/errors.hpp>
#include <boost/program_options/value_semantic.hpp>

#include <charconv>

namespace attnbatch::cli {

namespace po = boost::program_options;

namespace {

// Boost fills in the option's name (%canonical_option%) when it stores the value.
class NotAnAutoCount : public po::error_with_option_name {
public:
    NotAnAutoCount(const std::string& token, const std::string& expected)
        : po::error_with_option_name("the argument ('%value%') for option '%canonical_option%' is invalid: expected " + expected) {
        set_substitute("value", token);
    }
};

// The whole of `text` as a decimal int64: errc{} or why not (out of range, or not a number).
std::errc parse_whole(const std::string& text, std::int64_t& value) {
    const char* const end = text.data() + text.size();
    const auto [stop, error] = std::from_chars(text.data(), end, value);
    if (error != std::errc{}) return error;
    return text.empty() || stop != end ? std::errc::invalid_argument : std::errc{};
}

}  // namespace

void validate(boost::any& out, const std::vector<std::string>& tokens, AutoCount*, int) {
    po::validators::check_first_occurrence(out);
    const std::string& token = po::validators::get_single_string(tokens);
    AutoCount count;
    if (token != "auto") {
        const std::errc error = parse_whole(token, count.value);
        if (error == std::errc::result_out_of_range) throw NotAnAutoCount(token, "auto or a whole number below 2^63");
        if (error != std::errc{}) throw NotAnAutoCount(token, "auto or a whole number");
    }
    out = count;
}

std::string to_string(AutoCount count) { return count.is_auto() ? "auto" : std::to_string(count.value); }

std::optional<std::int64_t> whole_number(const std::string& text) {
    std::int64_t value = 0;
    if (parse_whole(text, value) != std::errc{}) return std::nullopt;
    return value;
}

}  // namespace attnbatch::cli
