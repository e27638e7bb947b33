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

}  // namespace
}  // namespace attnbatch::cli
