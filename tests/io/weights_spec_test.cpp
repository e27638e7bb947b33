// The one rule set of projection-weights files: `run` (describe_weights) stops at the first
// broken rule, `inspect` (check_weights, on the file's schema) lists them all, in the same
// words and the same order.
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"

#include "attnbatch/io/h5/file_schema.hpp"
#include "attnbatch/io/models/weights_spec.hpp"

#include <filesystem>
#include <functional>

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

// A stated count of another type or below 1 was ignored (run used H = 1) or escaped as an
// internal error; now both paths refuse it in the same words.
TEST(WeightsSpec, BothRefuseAStatedAttributeOfAnotherTypeOrValue) {
    const testing::TempDir dir;
    const std::string path = dir.file("w.h5");
    const auto with = [&](const std::function<void(const File&)>& state) {
        std::filesystem::remove(path);
        const File file = File::create(path);
        matrix(file, "/w_q", {16, 8});
        matrix(file, "/w_k", {16, 8});
        matrix(file, "/w_v", {16, 8});
        state(file);
    };
    const std::vector<std::pair<std::function<void(const File&)>, std::string>> cases = {
        {[](const File& f) { set_text_attribute(f, "heads", "2"); },
         "root attribute heads is a string, expected a positive scalar integer (the number of query heads)"},
        {[](const File& f) { set_real_attribute(f, "heads", 2.0); },
         "root attribute heads is a float64, expected a positive scalar integer (the number of query heads)"},
        {[](const File& f) { set_int_array_attribute(f, "heads", {2, 2}); },
         "root attribute heads is an int64 array of shape [2], expected a positive scalar integer (the number of query heads)"},
        {[](const File& f) { set_int_attribute(f, "heads", 0); },
         "root attribute heads = 0, expected a positive scalar integer (the number of query heads)"},
        {[](const File& f) { set_int_attribute(f, "kv_heads", -2); },
         "root attribute kv_heads = -2, expected a positive scalar integer (the number of key/value heads)"},
        {[](const File& f) { set_text_attribute(f, "rope_theta", "1e4"); },
         "root attribute rope_theta is a string, expected a scalar number (the base of the model's rotary embeddings)"},
    };
    for (const auto& [state, expected] : cases) {
        with(state);
        const WeightsCheck check = check_weights(path, read_file_schema(path), 0);
        ASSERT_FALSE(check.valid()) << expected;
        EXPECT_EQ(check.problems.front().rfind(path + ": " + expected, 0), 0u) << check.problems.front();
        EXPECT_EQ(first_broken_rule(path, WeightsRequest{0, 0, 16, "in.h5:/embeddings"}), check.problems.front());
    }
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
