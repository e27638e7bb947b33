// Bad options of `generate`: exit 2, one line on stderr naming the option, and no file.
#include "support/attnbatch_binary.hpp"
#include "support/file_bytes.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

namespace attnbatch::testing {
namespace {

struct BadOptions {
    const char* name;                // the test's name
    std::vector<std::string> args;   // after `generate --output OUT`; "@W" a scratch path, "@C" a bad config, "@D" a directory,
                                     // "@O" OUT spelled another way
    std::string named;               // what the message must name
    bool with_output = true;
};

class GenerateBadOptions : public ::testing::TestWithParam<BadOptions> {};

TEST_P(GenerateBadOptions, ExitTwoNamingTheOption) {
    const BadOptions& bad = GetParam();
    const TempDir dir;
    const std::string output = dir.file("out.h5");
    write_text(dir.file("bad.ini"), "num-seqs = 4\nbogus-key = 1\n");
    std::vector<std::string> args{"generate"};
    if (bad.with_output) args.insert(args.end(), {"--output", output});
    for (const std::string& arg : bad.args) {
        args.push_back(arg == "@W"   ? dir.file("w.h5")
                       : arg == "@C" ? dir.file("bad.ini")
                       : arg == "@D" ? dir.path()
                       : arg == "@O" ? dir.path() + "/./out.h5"
                                     : arg);
    }
    const Outcome run = attnbatch(args);
    EXPECT_EQ(run.status, 2) << run.err;
    EXPECT_EQ(line_count(run.err), 1u) << run.err;
    EXPECT_NE(run.err.find(bad.named), std::string::npos) << "expected '" << bad.named << "' in: " << run.err;
    EXPECT_TRUE(run.out.empty()) << run.out;
    EXPECT_FALSE(exists(output));
    EXPECT_FALSE(exists(output + ".partial"));
    EXPECT_FALSE(exists(dir.file("w.h5")));
}

INSTANTIATE_TEST_SUITE_P(
    Generate, GenerateBadOptions,
    ::testing::Values(
        BadOptions{"ZeroSequences", {"--num-seqs", "0"}, "--num-seqs"},
        BadOptions{"NegativeLength", {"--seq-len", "-4"}, "--seq-len"},
        BadOptions{"ZeroDim", {"--dim", "0"}, "--dim"},
        BadOptions{"ZeroHeads", {"--heads", "0"}, "--heads"},
        BadOptions{"NotANumber", {"--num-seqs", "many"}, "--num-seqs"},
        BadOptions{"MinLenAboveSeqLen", {"--seq-len", "64", "--min-len", "65"}, "--min-len"},
        BadOptions{"NegativeMinLen", {"--min-len", "-1"}, "--min-len"},
        BadOptions{"HeadsNotDividingDim", {"--dim", "64", "--heads", "3"}, "--heads"},
        BadOptions{"UnknownDtype", {"--dtype", "float16"}, "--dtype"},
        BadOptions{"UnknownLayout", {"--qkv", "--qkv-layout", "diagonal"}, "--qkv-layout"},
        BadOptions{"LayoutWithoutQkv", {"--qkv-layout", "split"}, "--qkv-layout"},
        BadOptions{"MissingOutput", {"--num-seqs", "4"}, "--output", false},
        BadOptions{"UnknownOption", {"--no-such-option"}, "--no-such-option"},
        BadOptions{"BadConfigKey", {"--config", "@C"}, "bogus-key"},
        BadOptions{"BadSeed", {"--seed", "abc"}, "--seed"},
        BadOptions{"NonFiniteScale", {"--scale-values", "nan"}, "--scale-values"},
        BadOptions{"QkvWithWeights", {"--qkv", "--weights-out", "@W"}, "--weights-out"},
        BadOptions{"HeadDimWithoutProjection", {"--head-dim", "8"}, "--head-dim"},
        BadOptions{"OutDimWithoutOutputProjection", {"--weights-out", "@W", "--out-dim", "8", "--no-output-projection"}, "--out-dim"},
        BadOptions{"DatasetCollidesWithLengths", {"--dataset", "/lengths", "--min-len", "1"}, "--dataset"},
        BadOptions{"ZeroSlab", {"--slab-bytes", "0"}, "--slab-bytes"},
        BadOptions{"OutputIsADirectory", {"--output", "@D", "--force"}, "is a directory", false},
        // The same file under another spelling got past a string comparison and failed in HDF5.
        BadOptions{"WeightsOutIsOutputSpelledOtherwise", {"--weights-out", "@O", "--heads", "2"}, "--weights-out"},
        // Found by fuzz/fuzz_options: Boost.Program_options looped forever formatting these.
        BadOptions{"PlaceholderInOptionName", {"--x%original_token%"}, "--xoriginal_token"},
        BadOptions{"PlaceholderInValue", {"--num-seqs", "%value%"}, "('value')"}),
    [](const ::testing::TestParamInfo<BadOptions>& param_info) { return std::string(param_info.param.name); });

// --print-config shows every value, whatever its type. Found while writing fuzz/fuzz_options
// (it now checks the printed text): bench's unsigned --seed printed as "seed = ?".
TEST(PrintConfig, ShowsValuesOfEveryType) {
    const Outcome bench = attnbatch({"bench", "--seed", "5", "--print-config"});
    EXPECT_EQ(bench.status, 0) << bench.err;
    EXPECT_NE(bench.out.find("seed = 5\n"), std::string::npos) << bench.out;
    const Outcome generate = attnbatch({"generate", "--slab-bytes", "4096", "--scale-values", "2.5", "--print-config"});
    EXPECT_EQ(generate.status, 0) << generate.err;
    EXPECT_NE(generate.out.find("slab-bytes = 4096\n"), std::string::npos) << generate.out;
    EXPECT_NE(generate.out.find("scale-values = 2.5\n"), std::string::npos) << generate.out;
    for (const Outcome* run : {&bench, &generate}) EXPECT_EQ(run->out.find("cannot show"), std::string::npos) << run->out;
}

}  // namespace
}  // namespace attnbatch::testing
