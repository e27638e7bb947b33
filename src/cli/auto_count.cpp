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

}  // namespace

void validate(boost::any& out, const std::vector<std::string>& tokens, AutoCount*, int) {
    po::validators::check_first_occurrence(out);
    const std::string& token = po::validators::get_single_string(tokens);
    AutoCount count;
    if (token != "auto") {
        const char* const end = token.data() + token.size();
        const auto [stop, error] = std::from_chars(token.data(), end, count.value);
        if (error == std::errc::result_out_of_range) throw NotAnAutoCount(token, "auto or a whole number below 2^63");
        if (token.empty() || error != std::errc{} || stop != end) throw NotAnAutoCount(token, "auto or a whole number");
    }
    out = count;
}

std::string to_string(AutoCount count) { return count.is_auto() ? "auto" : std::to_string(count.value); }

}  // namespace attnbatch::cli
