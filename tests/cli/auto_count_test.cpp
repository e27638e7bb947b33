// The count options whose default shows as auto (auto_count.hpp): auto is a value they take
// wherever options come from, and a bad value names the option, the text and what it takes.
#include <gtest/gtest.h>

#include <boost/program_options.hpp>

#include <string>
#include <vector>

#include "auto_count.hpp"
#include "support/attnbatch_binary.hpp"

namespace attnbatch::cli {
namespace {

namespace po = boost::program_options;

// The value --block-q gets from `text`, through Boost as the commands parse it.
AutoCount parsed(const std::string& text) {
    po::options_description options;
    options.add_options()("block-q", po::value<AutoCount>()->default_value(AutoCount{}, "auto"), "query tile rows");
    const std::vector<std::string> args{"--block-q", text};
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(options).run(), vm);
    po::notify(vm);
    return vm["block-q"].as<AutoCount>();
}

std::string refusal(const std::string& text) {
    try {
        parsed(text);
    } catch (const po::error& e) {
        return e.what();
    }
    return "";
}

TEST(AutoCount, TakesAutoZeroAndWholeNumbers) {
    EXPECT_TRUE(parsed("auto").is_auto());
    EXPECT_TRUE(parsed("0").is_auto());
    EXPECT_EQ(parsed("64").value, 64);
    EXPECT_EQ(parsed("-5").value, -5) << "the sign is the option's own check to refuse, with its range";
    EXPECT_EQ(to_string(parsed("auto")), "auto");
    EXPECT_EQ(to_string(parsed("128")), "128");
}

TEST(AutoCount, RefusesOtherTextNamingTheOptionAndWhatItTakes) {
    for (const std::string text : {"x", "1.5", "64k", "Auto", " 8", "8 ", "+"}) {
        const std::string why = refusal(text);
        EXPECT_NE(why.find("'" + text + "'"), std::string::npos) << text << ": " << why;
        EXPECT_NE(why.find("block-q"), std::string::npos) << text << ": " << why;
        EXPECT_NE(why.find("expected auto or a whole number"), std::string::npos) << text << ": " << why;
    }
    EXPECT_NE(refusal("9223372036854775808").find("below 2^63"), std::string::npos);
    EXPECT_EQ(parsed("9223372036854775807").value, 9223372036854775807) << "2^63 - 1 fits";
}

// The binary: the word its help shows is accepted on the command line and in the environment,
// and --print-config shows it back.
TEST(AutoCount, TheCommandsTakeTheWordTheirHelpShows) {
    const testing::Outcome bench = testing::attnbatch(
        {"bench", "--batch", "1", "--heads", "1", "--seq-len", "64", "--head-dim", "16", "--repeats", "1", "--block-q", "auto",
         "--block-k", "auto"});
    EXPECT_EQ(bench.status, 0) << bench.out << bench.err;
    const testing::Outcome config = testing::attnbatch({"run", "--print-config", "--input", "in.h5", "--output", "out.h5",
                                                        "--block-q", "auto", "--block-k", "32", "--unit-sequences", "auto"},
                                                       {{"ATTNBATCH_UNIT_SEQUENCES", "auto"}});
    EXPECT_EQ(config.status, 0) << config.out << config.err;
    EXPECT_NE(config.out.find("block-q = auto"), std::string::npos) << config.out;
    EXPECT_NE(config.out.find("block-k = 32"), std::string::npos) << config.out;
    EXPECT_NE(config.out.find("unit-sequences = auto"), std::string::npos) << config.out;
    const testing::Outcome negative = testing::attnbatch({"run", "--input", "in.h5", "--output", "out.h5", "--block-k", "-4"});
    EXPECT_EQ(negative.status, 2);
    EXPECT_NE((negative.out + negative.err).find("--block-k -4: expected auto or a positive tile size"), std::string::npos)
        << negative.out << negative.err;
}

// bench --check shows its default as off: off is a value, and a bad value is refused before the
// timed runs (it used to be checked after them).
TEST(AutoCount, BenchCheckTakesOffAndRefusesBadCountsBeforeTiming) {
    const std::vector<std::string> shape{"bench", "--batch", "1", "--heads", "2", "--seq-len", "64", "--head-dim", "16",
                                         "--repeats", "1"};
    std::vector<std::string> off = shape, two = shape, bad = shape, negative = shape;
    off.insert(off.end(), {"--check", "off"});
    two.insert(two.end(), {"--check", "2"});
    bad.insert(bad.end(), {"--check", "some"});
    negative.push_back("--check=-3");
    const testing::Outcome unchecked = testing::attnbatch(off);
    EXPECT_EQ(unchecked.status, 0) << unchecked.out << unchecked.err;
    EXPECT_EQ(unchecked.out.find("accuracy"), std::string::npos) << unchecked.out;
    const testing::Outcome checked = testing::attnbatch(two);
    EXPECT_EQ(checked.status, 0) << checked.out << checked.err;
    EXPECT_NE(checked.out.find("(2 sequence-head pairs)"), std::string::npos) << checked.out;
    for (const auto& [args, text] : {std::pair{bad, std::string("'some'")}, std::pair{negative, std::string("'-3'")}}) {
        const testing::Outcome refused = testing::attnbatch(args);
        EXPECT_EQ(refused.status, 2) << text;
        EXPECT_NE(refused.err.find("--check " + text + ": expected off or a number of (sequence, head) pairs"), std::string::npos)
            << refused.err;
        EXPECT_EQ(refused.out.find("time"), std::string::npos) << "refused before timing: " << refused.out;
    }
}

}  // namespace
}  // namespace attnbatch::cli
