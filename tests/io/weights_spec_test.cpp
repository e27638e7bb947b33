// The one rule set of projection-weights files: `run` (describe_weights) stops at the first
// broken rule, `inspect` (check_weights, on the file's schema) lists them all, in the same
// words and the same order.
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"

#include "attnbatch/io/h5/file_schema.hpp"
#include "attnbatch/io/models/weights_spec.hpp"

namespace attnbatch::io {
namespace {

using testing::put;
using testing::ramp;

void matrix(const File& file, const std::string& path, const Dims& dims) {
    put(file, path, Datatype::float32(), dims, ramp(element_count(dims)));
}

std::string first_broken_rule(const std::string& path, const WeightsRequest& request) {
    try {
        describe_weights(path, request);
    } catch (const Error& error) {
        EXPECT_EQ(error.exit_code(), exit_invalid_input) << error.what();
        return error.what();
    }
    return "";
}

TEST(WeightsSpec, RunStopsAtTheFirstBrokenRuleInspectListsThemAll) {
    const testing::TempDir dir;
    const std::string path = dir.file("w.h5");
    {
        const File file = File::create(path);
        matrix(file, "/w_q", {16, 8});
        matrix(file, "/w_k", {16, 8});
        matrix(file, "/w_v", {16, 12});
        matrix(file, "/b_q", {7});  // broken: /w_q has 8 columns
        matrix(file, "/b_o", {6});  // broken: no /w_o
    }
    const WeightsCheck check = check_weights(path, read_file_schema(path), 2);
    ASSERT_EQ(check.problems.size(), 2u);
    EXPECT_EQ(check.problems[0], path + ": dataset /b_q has shape [7], expected [8] (the columns of /w_q)");
    EXPECT_EQ(check.problems[1], path + ": dataset /b_o is present without /w_o; expected /w_o [H*d_v, d_out] alongside it");
    WeightsRequest request;
    request.heads = 2;
    request.d = 16;
    request.d_source = "in.h5:/embeddings";
    EXPECT_EQ(first_broken_rule(path, request), check.problems[0]);
}

TEST(WeightsSpec, BothFindTheHeadsTheFileStates) {
    const testing::TempDir dir;
    const std::string path = dir.file("w.h5");
    {
        const File file = File::create(path);
        matrix(file, "/w_q", {16, 8});  // H*d_k = 8
        matrix(file, "/w_k", {16, 4});  // G*d_k = 4: G = 2 for H = 4
        matrix(file, "/w_v", {16, 6});  // G*d_v = 6
        matrix(file, "/w_o", {12, 5});  // H*d_v = 4*3
        set_int_attribute(file, "heads", 4);
    }
    const WeightsCheck check = check_weights(path, read_file_schema(path), 0);
    EXPECT_TRUE(check.valid()) << (check.problems.empty() ? "" : check.problems.front());
    EXPECT_EQ(check.heads, 4);
    EXPECT_EQ(check.kv_heads, 2);
    const DescribedWeights described = describe_weights(path, WeightsRequest{0, 0, 16, "in.h5:/embeddings"});
    EXPECT_EQ(described.heads, 4);
    EXPECT_EQ(described.kv_heads, 2);
    EXPECT_EQ(described.spec.d_out, 5);
    EXPECT_EQ(described.spec.file_heads, 4);

    // The same file against another head count: the one message in both.
    const WeightsCheck other = check_weights(path, read_file_schema(path), 8);
    ASSERT_FALSE(other.valid());
    try {
        describe_weights(path, WeightsRequest{8, 0, 16, "in.h5:/embeddings"});
        ADD_FAILURE() << "no Error";
    } catch (const Error& error) {
        EXPECT_EQ(error.exit_code(), exit_usage);
        EXPECT_EQ(error.what(), other.problems.front());
    }
}

}  // namespace
}  // namespace attnbatch::io
