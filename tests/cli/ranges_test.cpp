// The RANGE syntax every subcommand shares (cli/ranges.hpp) and the "did you mean" of
// misspelt names (cli/suggest.hpp): pure string code, tested without the binary.
#include "ranges.hpp"
#include "suggest.hpp"

#include <gtest/gtest.h>

#include "attnbatch/error.hpp"

namespace attnbatch::cli {
namespace {

std::vector<std::int64_t> indices(const std::string& text, std::int64_t limit) {
    return expand_ranges(parse_ranges(text, "--x"), limit, "--x", "N");
}

// Every spelling of the syntax, zero-based and half-open as in Python's slices.
TEST(Ranges, EverySpellingMeansWhatPythonMeans) {
    EXPECT_EQ(indices("3", 10), (std::vector<std::int64_t>{3}));
    EXPECT_EQ(indices("2:5", 10), (std::vector<std::int64_t>{2, 3, 4}));
    EXPECT_EQ(indices(":2", 10), (std::vector<std::int64_t>{0, 1}));
    EXPECT_EQ(indices("8:", 10), (std::vector<std::int64_t>{8, 9}));
    EXPECT_EQ(indices(":", 3), (std::vector<std::int64_t>{0, 1, 2}));
    EXPECT_EQ(indices("all", 3), (std::vector<std::int64_t>{0, 1, 2}));
    EXPECT_EQ(indices("0:2,5,8:", 10), (std::vector<std::int64_t>{0, 1, 5, 8, 9}));
    EXPECT_EQ(indices(" 1 : 3 ", 10), (std::vector<std::int64_t>{1, 2}));
}

TEST(Ranges, MalformedTextIsAUsageErrorNamingTheOptionAndTheSyntax) {
    for (const std::string text : {"", "a", "-1", "3:1", "2:2", "1:2:3", "1,,2", "1,", "1..3", "1-3", "0x3"}) {
        try {
            parse_ranges(text, "--sequences");
            ADD_FAILURE() << "'" << text << "' was accepted";
        } catch (const Error& error) {
            EXPECT_EQ(error.exit_code(), exit_usage) << text;
            const std::string what = error.what();
            EXPECT_NE(what.find("--sequences: '" + text + "'"), std::string::npos) << what;
            EXPECT_NE(what.find("A:B"), std::string::npos) << what;
        }
    }
}

// The whole text is quoted once; a list's item or a range's bound is quoted besides when it is
// only a part of it.
TEST(Ranges, AnErrorQuotesThePartAtFaultOnlyWhenItIsNotTheWholeText) {
    const auto message = [](const std::string& text) {
        try {
            parse_ranges(text, "--sequences");
        } catch (const Error& error) {
            return std::string(error.what());
        }
        return std::string("accepted");
    };
    const auto count = [](const std::string& what, const std::string& part) {
        int n = 0;
        for (std::size_t at = what.find(part); at != std::string::npos; at = what.find(part, at + 1)) ++n;
        return n;
    };
    EXPECT_EQ(count(message("7:7"), "'7:7'"), 1) << message("7:7");
    EXPECT_NE(message("7:7").find("it is empty"), std::string::npos) << message("7:7");
    EXPECT_EQ(count(message("-3"), "'-3'"), 1) << message("-3");
    EXPECT_EQ(count(message("3,7:7"), "'7:7'"), 1) << message("3,7:7");
    EXPECT_NE(message("3,7:7").find("'3,7:7' is not a range: '7:7' is empty"), std::string::npos) << message("3,7:7");
    EXPECT_NE(message("2:x").find("'x' is not a number"), std::string::npos) << message("2:x");
}

TEST(Ranges, PastTheLimitIsRefusedWithTheLimit) {
    try {
        indices("8:12", 10);
        ADD_FAILURE() << "8:12 of 10 was accepted";
    } catch (const Error& error) {
        EXPECT_EQ(error.exit_code(), exit_usage);
        EXPECT_NE(std::string(error.what()).find("--x 8:12 ends past N = 10"), std::string::npos) << error.what();
    }
    EXPECT_THROW(indices("10", 10), Error);
    EXPECT_THROW(indices("10:", 10), Error);
}

TEST(Ranges, ABlockIsOneItemAndItsOpenEndStaysOpen) {
    const IndexRange open = parse_block("4:", "--sequences");
    EXPECT_EQ(open.first, 4);
    EXPECT_FALSE(open.last.has_value());
    EXPECT_EQ(resolve_block(open, 9, "--sequences", "N"), (std::pair<std::int64_t, std::int64_t>{4, 9}));
    EXPECT_EQ(resolve_block(parse_block("5", "--sequences"), 9, "--sequences", "N"),
              (std::pair<std::int64_t, std::int64_t>{5, 6}));
    try {
        parse_block("1,3", "--sequences");
        ADD_FAILURE() << "a list was taken as one block";
    } catch (const Error& error) {
        EXPECT_EQ(error.exit_code(), exit_usage);
        EXPECT_NE(std::string(error.what()).find("one block"), std::string::npos) << error.what();
    }
}

TEST(Ranges, PrintedAsHalfOpenIntervals) {
    EXPECT_EQ(format_range(0, 4), "[0, 4)");
    EXPECT_EQ(format_range(7, 8), "7");
    EXPECT_EQ(format_indices({0, 1, 2, 3, 7, 9, 10, 11}), "[0, 4), 7, [9, 12)");
    EXPECT_EQ(format_indices({}), "");
    EXPECT_EQ(range_syntax(2, 5), "2:5");
    // What is printed reads back as what was meant.
    EXPECT_EQ(indices(range_syntax(2, 5), 10), (std::vector<std::int64_t>{2, 3, 4}));
}

TEST(Suggest, TheClosestNameWhenCloseEnough) {
    const std::vector<std::string> names{"causal", "scale", "save-weights", "weights-seqs", "heads"};
    EXPECT_EQ(closest_name("casual", names), "causal");
    EXPECT_EQ(closest_name("head", names), "heads");
    EXPECT_EQ(closest_name("save-weight", names), "save-weights");
    EXPECT_EQ(closest_name("weights-seq", names), "weights-seqs");
    EXPECT_EQ(closest_name("frobnicate", names), "");
    EXPECT_EQ(did_you_mean("scael", names, "--"), "; did you mean '--scale'?");
    EXPECT_EQ(did_you_mean("xyzzy", names), "");
}

}  // namespace
}  // namespace attnbatch::cli
