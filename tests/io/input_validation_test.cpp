// One test per input rule: each asserts the exit code, and that the one-line message names
// the file and the dataset or option at fault.
#include "support/file_bytes.hpp"
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"

#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/kernels/half.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <functional>
#include <limits>

namespace attnbatch::io {
namespace {

using testing::put;
using testing::ramp;

class InputValidation : public ::testing::Test {
protected:
    testing::TempDir dir;
    const std::string input = dir.file("in.h5");
    const std::string weights = dir.file("w.h5");

    static void make(const std::string& path, const std::function<void(const File&)>& build) {
        const File file = File::create(path);
        build(file);
    }
    static void embeddings(const File& file, const Dims& dims = {4, 8, 16}, const std::string& path = "/embeddings") {
        put(file, path, Datatype::float32(), dims, ramp(element_count(dims)));
    }
    static void matrix(const File& file, const std::string& path, const Dims& dims) {
        put(file, path, Datatype::float32(), dims, ramp(element_count(dims)));
    }
    // A valid projection file for d = 16, H*d_k = 8, H*d_v = 12, d_out = 6, all biases.
    static void projections(const File& file) {
        matrix(file, "/w_q", {16, 8});
        matrix(file, "/w_k", {16, 8});
        matrix(file, "/w_v", {16, 12});
        matrix(file, "/w_o", {12, 6});
        matrix(file, "/b_q", {8});
        matrix(file, "/b_k", {8});
        matrix(file, "/b_v", {12});
        matrix(file, "/b_o", {6});
    }
    InputOptions options() const {
        InputOptions result;
        result.input_path = input;
        return result;
    }
    InputOptions weights_options(const std::function<void(const File&)>& build) const {
        make(input, [](const File& file) { embeddings(file); });
        make(weights, build);
        InputOptions result = options();
        result.weights_path = weights;
        return result;
    }

    // Expects an Error with `code` whose single-line message contains `file` and every
    // fragment.
    static void expect_error(const InputOptions& options, int code, const std::string& file,
                             const std::vector<std::string>& fragments) {
        try {
            describe_input(options);
            ADD_FAILURE() << "no Error";
        } catch (const Error& error) {
            const std::string message = error.what();
            EXPECT_EQ(error.exit_code(), code) << message;
            EXPECT_NE(message.find(file), std::string::npos) << "file missing from: " << message;
            for (const auto& fragment : fragments) {
                EXPECT_NE(message.find(fragment), std::string::npos) << "'" << fragment << "' missing from: " << message;
            }
            EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
        }
    }
};

// ---- files ----

TEST_F(InputValidation, MissingFileIsAnIoError) {
    expect_error(options(), exit_io, input, {"No such file", "--input"});
}

TEST_F(InputValidation, DirectoryIsAnIoError) {
    InputOptions o = options();
    o.input_path = dir.path();
    expect_error(o, exit_io, dir.path(), {"directory", "--input"});
}

TEST_F(InputValidation, GarbageBytesAreNotHdf5) {
    testing::write_text(input, std::string(4096, '\x42'));
    expect_error(options(), exit_invalid_input, input, {"not an HDF5 file", "--input"});
}

TEST_F(InputValidation, LockedFileNamesTheLockingVariable) {
    make(input, [](const File& file) { embeddings(file); });
    const int fd = ::open(input.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
    expect_error(options(), exit_io, input, {"HDF5_USE_FILE_LOCKING=FALSE"});
    ::close(fd);
}


// ---- the packed layout: /tokens [T, d] (or Q/K/V [T, H*d]) and /offsets [N+1] ----

class PackedValidation : public InputValidation {
protected:
    // Sequences of 3, 0, 5 and 2 tokens: T = 10.
    static void packed(const File& file, const std::vector<std::int64_t>& offsets = {0, 3, 3, 8, 10}, hsize_t rows = 10,
                       const std::string& path = "/tokens") {
        put(file, path, Datatype::float32(), {rows, 16}, ramp(rows * 16));
        put(file, "/offsets", Datatype::int64(), {offsets.size()}, offsets);
    }
};

TEST_F(PackedValidation, TokensAndOffsetsAreFoundWithoutOptions) {
    make(input, [](const File& file) { packed(file); });
    const InputSpec spec = describe_input(options());
    EXPECT_TRUE(spec.packed);
    EXPECT_EQ(spec.dataset, "/tokens");
    EXPECT_EQ(spec.offsets, "/offsets");
    EXPECT_EQ(spec.n, 4);
    EXPECT_EQ(spec.tokens, 10);
    EXPECT_EQ(spec.len, 5);  // the longest sequence
    EXPECT_EQ(spec.d, 16);
    EXPECT_TRUE(spec.lengths.empty());
}

TEST_F(PackedValidation, OffsetsMustStartAtZeroRiseAndEndAtT) {
    make(input, [](const File& file) { packed(file, {1, 3, 3, 8, 10}); });
    expect_error(options(), exit_invalid_input, input, {"/offsets[0] = 1", "expected 0"});
    ::unlink(input.c_str());
    make(input, [](const File& file) { packed(file, {0, 3, 2, 8, 10}); });
    expect_error(options(), exit_invalid_input, input, {"/offsets[2] = 2", "never decrease"});
    ::unlink(input.c_str());
    make(input, [](const File& file) { packed(file, {0, 3, 3, 8, 9}); });
    expect_error(options(), exit_invalid_input, input, {"/offsets[4] = 9", "expected T = 10"});
}

TEST_F(PackedValidation, OffsetsMustBeIntegers) {
    make(input, [](const File& file) {
        put(file, "/tokens", Datatype::float32(), {10, 16}, ramp(160));
        put(file, "/offsets", Datatype::float32(), {3}, std::vector<float>{0, 4, 10});
    });
    expect_error(options(), exit_invalid_input, input, {"/offsets", "int64 [N+1]"});
}

TEST_F(PackedValidation, LengthsBesideOffsetsMustAgree) {
    make(input, [](const File& file) {
        packed(file);
        put(file, "/lengths", Datatype::int32(), {4}, std::vector<std::int32_t>{3, 0, 5, 2});
    });
    EXPECT_TRUE(describe_input(options()).packed);
    ::unlink(input.c_str());
    make(input, [](const File& file) {
        packed(file);
        put(file, "/lengths", Datatype::int32(), {4}, std::vector<std::int32_t>{3, 0, 4, 2});
    });
    expect_error(options(), exit_invalid_input, input, {"/lengths[2] = 4", "rows [3, 8)", "expected equal"});
}

TEST_F(PackedValidation, PackedQueriesKeysAndValuesShareT) {
    make(input, [](const File& file) {
        put(file, "/q", Datatype::float32(), {10, 8}, ramp(80));
        put(file, "/k", Datatype::float32(), {10, 8}, ramp(80));
        put(file, "/v", Datatype::float32(), {9, 12}, ramp(108));
        put(file, "/offsets", Datatype::int64(), {5}, std::vector<std::int64_t>{0, 3, 3, 8, 10});
    });
    InputOptions o = options();
    o.query = "/q";
    o.key = "/k";
    o.value = "/v";
    o.heads = 2;
    expect_error(o, exit_invalid_input, input, {"/v", "T = 9", "T = 10"});
}

// ---- the embeddings ----

TEST_F(InputValidation, MissingDatasetListsWhatIsThere) {
    make(input, [](const File& file) { embeddings(file, {4, 8, 16}, "/x"); });
    expect_error(options(), exit_invalid_input, input, {"/embeddings not found", "--dataset", "/x"});
}

TEST_F(InputValidation, GroupIsNotADataset) {
    make(input, [](const File& file) { Group::create(file, "/embeddings"); });
    expect_error(options(), exit_invalid_input, input, {"/embeddings is a group", "--dataset"});
}

TEST_F(InputValidation, WrongRank) {
    make(input, [](const File& file) { embeddings(file, {4, 16}); });
    expect_error(options(), exit_invalid_input, input,
                 {"dataset /embeddings has shape [4, 16] (rank 2), expected [N, L, d] (rank 3)", "--dataset"});
}

TEST_F(InputValidation, IntegerDataIsRejected) {
    make(input, [](const File& file) {
        put(file, "/embeddings", Datatype::int32(), {2, 2, 2}, std::vector<std::int32_t>(8, 1));
    });
    expect_error(options(), exit_invalid_input, input, {"/embeddings", "int32", "expected float32 or float64"});
}

// float16 and bfloat16 data are read (half_width_input_test.cpp); other 2-byte floats are not.
TEST_F(InputValidation, HalfWidthFloatOfOtherLayoutIsRejected) {
    make(input, [](const File& file) {
        put(file, "/embeddings", testing::other_half_width_float(), {2, 2, 2}, std::vector<std::uint16_t>(8, 0x3c00));
    });
    expect_error(options(), exit_invalid_input, input, {"/embeddings", "float16(e6m9)", "float16, or bfloat16", "astype('float32')"});
}

TEST_F(InputValidation, ZeroSequences) {
    make(input, [](const File& file) { embeddings(file, {0, 8, 16}); });
    expect_error(options(), exit_invalid_input, input, {"/embeddings", "N = 0"});
}

TEST_F(InputValidation, EmptyFeatureAxis) {
    make(input, [](const File& file) { embeddings(file, {2, 8, 0}); });
    expect_error(options(), exit_invalid_input, input, {"/embeddings", "d = 0"});
}

// Found while writing fuzz/fuzz_input: every axis within int range, but 2^61 elements in all
// (a 1.4 KB file with nothing stored); the scans count bytes in size_t.
TEST_F(InputValidation, MoreThan2To60ElementsIsRejected) {
    make(input, [](const File& file) {
        DatasetCreation chunked;
        chunked.chunk = {1, 1, 4};
        Dataset::create(file, "/embeddings", Datatype::float32(), {1, 2147437487, 1073764905}, chunked);
    });
    expect_error(options(), exit_invalid_input, input, {"/embeddings", "[1, 2147437487, 1073764905]", "2^60"});
}

TEST_F(InputValidation, HeadsMustDivideD) {
    make(input, [](const File& file) { embeddings(file); });
    InputOptions o = options();
    o.heads = 3;
    expect_error(o, exit_usage, input,
                 {"--heads 3 does not divide d = 16 of " + input + ":/embeddings", "divisors of 16: 1 2 4 8 16"});
}

TEST_F(InputValidation, NegativeHeads) {
    make(input, [](const File& file) { embeddings(file); });
    InputOptions o = options();
    o.heads = -2;
    try {
        describe_input(o);
        FAIL();
    } catch (const Error& error) {
        EXPECT_EQ(error.exit_code(), exit_usage);
        EXPECT_NE(std::string(error.what()).find("--heads -2"), std::string::npos);
    }
}

TEST_F(InputValidation, NaNInDataNamesTheIndex) {
    make(input, [](const File& file) {
        std::vector<float> values = ramp(4 * 8 * 16);
        values[(1 * 8 + 2) * 16 + 3] = std::numeric_limits<float>::quiet_NaN();
        put(file, "/embeddings", Datatype::float32(), {4, 8, 16}, values);
    });
    InputOptions o = options();
    o.scan_bytes = 100;  // many blocks: the index must still be global
    expect_error(o, exit_invalid_input, input, {"/embeddings", "non-finite", "nan", "[1, 2, 3]"});
}

TEST_F(InputValidation, InfInDataNamesTheIndex) {
    make(input, [](const File& file) {
        std::vector<double> values = testing::ramp64(4 * 8 * 16);
        values.back() = -std::numeric_limits<double>::infinity();
        put(file, "/embeddings", Datatype::float64(), {4, 8, 16}, values);
    });
    expect_error(options(), exit_invalid_input, input, {"/embeddings", "-inf", "[3, 7, 15]"});
}

TEST_F(InputValidation, Float64BeyondFloat32Range) {
    make(input, [](const File& file) {
        std::vector<double> values = testing::ramp64(2 * 2 * 2);
        values[5] = 1e300;
        put(file, "/embeddings", Datatype::float64(), {2, 2, 2}, values);
    });
    expect_error(options(), exit_invalid_input, input, {"/embeddings", "1e+300", "[1, 0, 1]", "float32"});
}

TEST_F(InputValidation, FiniteScanCanBeSkipped) {
    make(input, [](const File& file) {
        std::vector<float> values = ramp(8);
        values[0] = std::numeric_limits<float>::quiet_NaN();
        put(file, "/embeddings", Datatype::float32(), {2, 2, 2}, values);
    });
    InputOptions o = options();
    o.check_finite = false;
    EXPECT_NO_THROW(describe_input(o));
}

// ---- lengths ----

TEST_F(InputValidation, LengthsMustBeIntegers) {
    make(input, [](const File& file) {
        embeddings(file);
        put(file, "/lengths", Datatype::float32(), {4}, std::vector<float>(4, 2.0f));
    });
    expect_error(options(), exit_invalid_input, input, {"/lengths", "float32", "integer"});
}

TEST_F(InputValidation, LengthsMustHaveShapeN) {
    make(input, [](const File& file) {
        embeddings(file);
        put(file, "/lengths", Datatype::int32(), {5}, std::vector<std::int32_t>(5, 2));
    });
    expect_error(options(), exit_invalid_input, input, {"/lengths has shape [5], expected [N] = [4]", "--lengths"});
}

TEST_F(InputValidation, NegativeLength) {
    make(input, [](const File& file) {
        embeddings(file);
        put(file, "/lengths", Datatype::int64(), {4}, std::vector<std::int64_t>{3, 8, -1, 0});
    });
    expect_error(options(), exit_invalid_input, input, {"/lengths[2] = -1 is negative", "L = 8"});
}

TEST_F(InputValidation, LengthAboveL) {
    make(input, [](const File& file) {
        embeddings(file, {8, 32, 4});
        std::vector<std::int32_t> lengths(8, 32);
        lengths[7] = 40;
        put(file, "/lengths", Datatype::int32(), {8}, lengths);
    });
    expect_error(options(), exit_invalid_input, input,
                 {": /lengths[7] = 40 exceeds L = 32 (expected 0 <= length <= L)"});
}

TEST_F(InputValidation, ExplicitLengthsMustExist) {
    make(input, [](const File& file) { embeddings(file); });
    InputOptions o = options();
    o.lengths = "/valid_tokens";
    expect_error(o, exit_invalid_input, input, {"/valid_tokens not found", "--lengths"});
}

// ---- Q, K, V ----

TEST_F(InputValidation, QkvAllOrNone) {
    make(input, [](const File& file) { embeddings(file); });
    InputOptions o = options();
    o.query = "/q";
    o.key = "/k";
    expect_error(o, exit_usage, "--query", {"--key", "--value go together", "give all three"});
}

TEST_F(InputValidation, QkvExcludesDataset) {
    InputOptions o = options();
    o.dataset = "/embeddings";
    o.query = "/q";
    o.key = "/k";
    o.value = "/v";
    expect_error(o, exit_usage, "--dataset", {"--query"});
}

class QkvValidation : public InputValidation {
protected:
    InputOptions qkv(const Dims& q, const Dims& k, const Dims& v) const {
        make(input, [&](const File& file) {
            matrix(file, "/q", q);
            matrix(file, "/k", k);
            matrix(file, "/v", v);
        });
        InputOptions o = options();
        o.query = "/q";
        o.key = "/k";
        o.value = "/v";
        return o;
    }
};

TEST_F(QkvValidation, NMismatch) {
    expect_error(qkv({4, 8, 16}, {5, 8, 16}, {4, 8, 16}), exit_invalid_input, input,
                 {"dataset /k has N = 5", "/q has N = 4"});
}

TEST_F(QkvValidation, KeyValueLMismatch) {
    expect_error(qkv({4, 8, 16}, {4, 8, 16}, {4, 9, 16}), exit_invalid_input, input,
                 {"dataset /v has L = 9", "/k has L = 8"});
}

TEST_F(QkvValidation, QueryKeyWidthMismatch) {
    expect_error(qkv({4, 8, 16}, {4, 8, 12}, {4, 8, 16}), exit_invalid_input, input, {"/k has H*d_k = 12", "/q"});
}

TEST_F(QkvValidation, RankMismatch) {
    expect_error(qkv({4, 8, 16}, {4, 2, 8, 8}, {4, 8, 16}), exit_invalid_input, input, {"/k", "rank 4", "like --query"});
}

TEST_F(QkvValidation, WrongRank) {
    expect_error(qkv({4, 16}, {4, 16}, {4, 16}), exit_invalid_input, input, {"/q", "rank 2", "--query"});
}

TEST_F(QkvValidation, PackedAxisNotDivisibleByHeads) {
    InputOptions o = qkv({4, 8, 16}, {4, 8, 16}, {4, 8, 16});
    o.heads = 3;
    expect_error(o, exit_usage, input, {"--heads 3", "H*d_k", ":/q"});
}

TEST_F(QkvValidation, SplitLayoutHeadsDisagree) {
    InputOptions o = qkv({4, 2, 8, 8}, {4, 2, 8, 8}, {4, 2, 8, 8});
    o.heads = 4;
    expect_error(o, exit_usage, input, {"--heads 4", ":/q", "H = 2"});
}

TEST_F(QkvValidation, SplitLayoutHeadsMismatchAcrossDatasets) {
    expect_error(qkv({4, 2, 8, 8}, {4, 2, 8, 8}, {4, 4, 8, 8}), exit_invalid_input, input, {"/v has H = 4", "/q has H = 2"});
}

TEST_F(QkvValidation, WeightsDoNotApplyToQkv) {
    InputOptions o = qkv({4, 8, 16}, {4, 8, 16}, {4, 8, 16});
    o.weights_path = weights;
    expect_error(o, exit_usage, "--weights", {"--query"});
}

// ---- projection weights ----

TEST_F(InputValidation, WeightsFileMissing) {
    make(input, [](const File& file) { embeddings(file); });
    InputOptions o = options();
    o.weights_path = weights;
    expect_error(o, exit_io, weights, {"--weights"});
}

TEST_F(InputValidation, WeightsWithoutWq) {
    const InputOptions o = weights_options([](const File& file) {
        matrix(file, "/w_k", {16, 8});
        matrix(file, "/w_v", {16, 8});
    });
    expect_error(o, exit_invalid_input, weights, {"/w_q not found", "--weights"});
}

TEST_F(InputValidation, WqRowsMustBeD) {
    const InputOptions o = weights_options([](const File& file) {
        projections(file);
        H5Ldelete(file.id(), "/w_q", H5P_DEFAULT);
        matrix(file, "/w_q", {8, 8});
    });
    expect_error(o, exit_invalid_input, weights, {"/w_q has shape [8, 8]", "d = 16", input + ":/embeddings"});
}

TEST_F(InputValidation, WkMustMatchWq) {
    const InputOptions o = weights_options([](const File& file) {
        projections(file);
        H5Ldelete(file.id(), "/w_k", H5P_DEFAULT);
        matrix(file, "/w_k", {16, 4});
    });
    expect_error(o, exit_invalid_input, weights, {"/w_k has shape [16, 4], expected [16, 8]", "/w_q"});
}

TEST_F(InputValidation, WvRowsMustBeD) {
    const InputOptions o = weights_options([](const File& file) {
        projections(file);
        H5Ldelete(file.id(), "/w_v", H5P_DEFAULT);
        matrix(file, "/w_v", {15, 12});
    });
    expect_error(o, exit_invalid_input, weights, {"/w_v has shape [15, 12]", "d = 16"});
}

TEST_F(InputValidation, WoRowsMustBeHdv) {
    const InputOptions o = weights_options([](const File& file) {
        projections(file);
        H5Ldelete(file.id(), "/w_o", H5P_DEFAULT);
        matrix(file, "/w_o", {8, 6});
    });
    expect_error(o, exit_invalid_input, weights, {"/w_o has shape [8, 6]", "H*d_v = 12"});
}

TEST_F(InputValidation, BiasSizeMustMatch) {
    const InputOptions o = weights_options([](const File& file) {
        projections(file);
        H5Ldelete(file.id(), "/b_q", H5P_DEFAULT);
        matrix(file, "/b_q", {12});
    });
    expect_error(o, exit_invalid_input, weights, {"/b_q has shape [12], expected [8]"});
}

TEST_F(InputValidation, OutputBiasNeedsWo) {
    const InputOptions o = weights_options([](const File& file) {
        projections(file);
        H5Ldelete(file.id(), "/w_o", H5P_DEFAULT);
    });
    expect_error(o, exit_invalid_input, weights, {"/b_o is present without /w_o"});
}

TEST_F(InputValidation, WeightsMatrixRank) {
    const InputOptions o = weights_options([](const File& file) {
        projections(file);
        H5Ldelete(file.id(), "/w_v", H5P_DEFAULT);
        matrix(file, "/w_v", {16, 3, 4});
    });
    expect_error(o, exit_invalid_input, weights, {"/w_v has shape [16, 3, 4] (rank 3)", "--weights"});
}

TEST_F(InputValidation, HeadsMustDivideProjectionWidth) {
    InputOptions o = weights_options(projections);
    o.heads = 3;  // divides 12 (and d = 16 does not matter with weights) but not 8
    expect_error(o, exit_usage, weights, {"--heads 3", "/w_q"});
}

TEST_F(InputValidation, NaNInWeights) {
    const InputOptions o = weights_options([](const File& file) {
        projections(file);
        H5Ldelete(file.id(), "/w_v", H5P_DEFAULT);
        std::vector<float> values = ramp(16 * 12);
        values[5 * 12 + 7] = std::numeric_limits<float>::quiet_NaN();
        put(file, "/w_v", Datatype::float32(), {16, 12}, values);
    });
    expect_error(o, exit_invalid_input, weights, {"/w_v", "non-finite", "[5, 7]"});
}

// ---- what valid inputs give ----

TEST_F(InputValidation, EmbeddingsSpec) {
    make(input, [](const File& file) {
        embeddings(file, {4, 8, 16});
        put(file, "/lengths", Datatype::copy_of(H5T_STD_U8LE), {4}, std::vector<std::int32_t>{8, 0, 3, 8});
    });
    InputOptions o = options();
    o.heads = 4;
    const InputSpec spec = describe_input(o);
    EXPECT_EQ(spec.mode, InputMode::embeddings);
    EXPECT_EQ(spec.dataset, "/embeddings");
    EXPECT_EQ(spec.lengths, "/lengths");
    EXPECT_EQ(spec.dtype, DataType::float32);
    EXPECT_EQ(spec.n, 4);
    EXPECT_EQ(spec.len, 8);
    EXPECT_EQ(spec.d, 16);
    EXPECT_EQ(spec.heads, 4);
    EXPECT_EQ(spec.d_k, 4);
    EXPECT_EQ(spec.d_v, 4);
    EXPECT_EQ(spec.d_out(), 16);
    EXPECT_FALSE(spec.weights.has_value());
}

TEST_F(InputValidation, LengthsAreOptional) {
    make(input, [](const File& file) { embeddings(file, {2, 3, 4}, "/x"); });
    InputOptions o = options();
    o.dataset = "x";  // a relative name means the same as /x
    const InputSpec spec = describe_input(o);
    EXPECT_EQ(spec.dataset, "/x");
    EXPECT_TRUE(spec.lengths.empty());
    EXPECT_EQ(spec.heads, 1);
}

TEST_F(QkvValidation, PackedSpec) {
    InputOptions o = qkv({4, 8, 16}, {4, 8, 16}, {4, 8, 24});
    o.heads = 4;
    const InputSpec spec = describe_input(o);
    EXPECT_EQ(spec.mode, InputMode::qkv);
    EXPECT_EQ(spec.layout, QkvLayout::packed);
    EXPECT_EQ(spec.heads, 4);
    EXPECT_EQ(spec.d_k, 4);
    EXPECT_EQ(spec.d_v, 6);
    EXPECT_EQ(spec.d_out(), 24);
}

TEST_F(QkvValidation, SplitSpecTakesHeadsFromTheData) {
    const InputSpec spec = describe_input(qkv({4, 2, 8, 8}, {4, 2, 8, 8}, {4, 2, 8, 5}));
    EXPECT_EQ(spec.layout, QkvLayout::split);
    EXPECT_EQ(spec.heads, 2);
    EXPECT_EQ(spec.len, 8);
    EXPECT_EQ(spec.d_k, 8);
    EXPECT_EQ(spec.d_v, 5);
    EXPECT_EQ(spec.d_out(), 10);
}

TEST_F(InputValidation, WeightsSpec) {
    InputOptions o = weights_options(projections);
    o.heads = 2;
    const InputSpec spec = describe_input(o);
    ASSERT_TRUE(spec.weights.has_value());
    const WeightsSpec& w = *spec.weights;
    EXPECT_EQ(w.d_in, 16);
    EXPECT_EQ(w.qk_width, 8);
    EXPECT_EQ(w.v_width, 12);
    EXPECT_TRUE(w.has_w_o);
    EXPECT_EQ(w.d_out, 6);
    EXPECT_TRUE(w.has_b_q && w.has_b_k && w.has_b_v && w.has_b_o);
    EXPECT_EQ(spec.d_k, 4);
    EXPECT_EQ(spec.d_v, 6);
    EXPECT_EQ(spec.d_out(), 6);
}

}  // namespace
}  // namespace attnbatch::io
