// `attnbatch run` on bad input: one test per validation rule (docs/formats.md, io/input/input_spec.hpp). Every
// case asserts what a user relies on:
//   - the exit code: 2 usage/configuration, 3 invalid input, 4 I/O;
//   - stderr is ONE line ("attnbatch run: error: ...") naming the offending dataset, file or
//     option (and, where the rule has one, the index or value);
//   - no file named OUTPUT and no OUTPUT.partial afterwards (validation happens before the
//     output is created), and no other file appeared in the scratch directory;
//   - the input, weights and config files are byte-identical afterwards (digest before/after);
//     an OUTPUT or OUTPUT.partial that existed before is byte-identical too.
// The bad files are tiny (N = 4, L = 8, d = 8) and written through the io layer.
#include "support/attnbatch_binary.hpp"
#include "support/expect_mentions.hpp"
#include "support/file_bytes.hpp"
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>

namespace attnbatch::testing {
namespace {

using Args = std::vector<std::string>;

constexpr int kUsage = 2;
constexpr int kInvalidInput = 3;
constexpr int kIo = 4;

// As root, `run` calls MPI_Init: Open MPI refuses root without these.
const std::vector<std::pair<std::string, std::string>> kMpiEnv{{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                                                              {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};

constexpr hsize_t kN = 4, kL = 8, kD = 8;

// Deterministic, finite, small values: the data is valid unless a test breaks it.
template <class T>
std::vector<T> pattern(const io::Dims& dims) {
    std::vector<T> values(io::element_count(dims));
    for (std::size_t i = 0; i < values.size(); ++i) {
        values[i] = static_cast<T>(0.25 * std::sin(0.7 * static_cast<double>(i) + 0.3));
    }
    return values;
}

void put_f32(const io::File& file, const std::string& path, const io::Dims& dims) {
    put(file, path, io::Datatype::float32(), dims, pattern<float>(dims));
}

void put_lengths(const io::File& file, const std::vector<std::int32_t>& lengths, const std::string& path = "/lengths") {
    put(file, path, io::Datatype::int32(), {static_cast<hsize_t>(lengths.size())}, lengths);
}

std::set<std::string> listing(const std::string& directory) {
    std::set<std::string> names;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(directory)) {
        names.insert(std::filesystem::relative(entry.path(), directory).string());
    }
    return names;
}

class RunBadInput : public ::testing::Test {
protected:
    TempDir dir_;
    const std::string input_ = dir_.file("in.h5");
    const std::string weights_ = dir_.file("w.h5");
    std::string output_ = dir_.file("out.h5");

    // A valid embeddings file [N, L, d] float32, with `lengths` when given.
    void write_embeddings(const std::vector<std::int32_t>& lengths = {}) {
        const io::File file = io::File::create(input_);
        put_f32(file, "/embeddings", {kN, kL, kD});
        if (!lengths.empty()) put_lengths(file, lengths);
    }

    // A weights file for d = 8, H*d_k = H*d_v = 8, d_out = 8; each shape overridable.
    struct WeightShapes {
        io::Dims w_q{kD, 8}, w_k{kD, 8}, w_v{kD, 8}, w_o{8, kD};
        io::Dims b_q{8}, b_k{8}, b_v{8}, b_o{kD};
        bool with_w_o = true, with_b_o = true;
    };
    void write_weights(const WeightShapes& s) {
        const io::File file = io::File::create(weights_);
        put_f32(file, "/w_q", s.w_q);
        put_f32(file, "/w_k", s.w_k);
        put_f32(file, "/w_v", s.w_v);
        if (s.with_w_o) put_f32(file, "/w_o", s.w_o);
        put_f32(file, "/b_q", s.b_q);
        put_f32(file, "/b_k", s.b_k);
        put_f32(file, "/b_v", s.b_v);
        if (s.with_b_o) put_f32(file, "/b_o", s.b_o);
    }

    // Q, K, V packed [N, L, H*d] with the given shapes.
    void write_qkv(const io::Dims& q, const io::Dims& k, const io::Dims& v) {
        const io::File file = io::File::create(input_);
        put_f32(file, "/query", q);
        put_f32(file, "/key", k);
        put_f32(file, "/value", v);
    }

    Args run_args(const Args& extra) const {
        Args args{"run", "--input", input_, "--output", output_, "--progress", "never"};
        args.insert(args.end(), extra.begin(), extra.end());
        return args;
    }

    // Runs `attnbatch args...` and checks everything a rejection promises. `guarded` are the
    // files that must be byte-identical afterwards; the input and weights are added when they
    // exist, and so are OUTPUT and OUTPUT.partial when they existed before.
    void expect_rejected_args(const Args& args, int code, const std::vector<std::string>& mentions,
                              std::vector<std::string> guarded = {}) {
        const std::string partial = output_ + ".partial";
        for (const std::string& path : {input_, weights_}) {
            if (exists(path)) guarded.push_back(path);
        }
        const bool had_output = exists(output_), had_partial = exists(partial);
        if (had_output) guarded.push_back(output_);
        if (had_partial) guarded.push_back(partial);
        std::map<std::string, std::string> before;
        for (const std::string& path : guarded) {
            before[path] = digest(path);
            ASSERT_FALSE(before[path].empty()) << path << " should exist and be readable before the run";
        }
        const std::set<std::string> files_before = listing(dir_.path());

        const Outcome run = attnbatch(args, kMpiEnv);

        EXPECT_EQ(run.status, code) << "stderr:\n" << run.err << "stdout:\n" << run.out;
        EXPECT_EQ(line_count(run.err), 1u) << "stderr should be one line:\n" << run.err;
        EXPECT_TRUE(!run.err.empty() && run.err.back() == '\n') << run.err;
        EXPECT_EQ(run.err.rfind("attnbatch run: error: ", 0), 0u) << run.err;
        for (const std::string& part : mentions) expect_mentions(run.err, part);
        if (!had_output) {
            EXPECT_FALSE(exists(output_)) << output_ << " left behind by a rejected run";
        }
        if (!had_partial) {
            EXPECT_FALSE(exists(partial)) << partial << " left behind by a rejected run";
        }
        for (const std::string& path : guarded) EXPECT_EQ(digest(path), before[path]) << path << " was modified";
        EXPECT_EQ(listing(dir_.path()), files_before) << "the run left files behind";
    }

    void expect_rejected(const Args& extra, int code, const std::vector<std::string>& mentions,
                         const std::vector<std::string>& guarded = {}) {
        expect_rejected_args(run_args(extra), code, mentions, guarded);
    }
};

// --- the input file itself --------------------------------------------------------------

TEST_F(RunBadInput, MissingInputFile) {
    expect_rejected({}, kIo, {input_, "--input"});
}

TEST_F(RunBadInput, InputIsADirectory) {
    std::filesystem::create_directory(dir_.file("adir"));
    expect_rejected_args({"run", "--input", dir_.file("adir"), "--output", output_}, kIo, {dir_.file("adir"), "--input"});
}

TEST_F(RunBadInput, InputIsNotHdf5) {
    std::string garbage;
    for (int i = 0; i < 4096; ++i) garbage += static_cast<char>((i * 131 + 7) % 251);
    write_text(input_, garbage);
    expect_rejected({}, kInvalidInput, {input_, "not an HDF5 file"});
}

TEST_F(RunBadInput, EmptyInputFile) {
    write_text(input_, "");
    expect_rejected({}, kInvalidInput, {input_});
}

// The first half of a valid file: it has the HDF5 signature but is corrupt content, which
// input_spec.hpp classes as invalid input (3), not as a file that cannot be opened or read (4).
TEST_F(RunBadInput, TruncatedHdf5File) {
    const std::string whole = dir_.file("whole.h5");
    ASSERT_EQ(attnbatch({"generate", "--output", whole, "--num-seqs", "16", "--seq-len", "16", "--dim", "8"}).status, 0);
    std::ifstream in(whole, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GT(bytes.size(), 4096u);
    write_text(input_, bytes.substr(0, bytes.size() / 2));
    ASSERT_TRUE(io::is_hdf5_file(input_));
    expect_rejected({}, kInvalidInput, {input_});
}

// --- the embeddings dataset ---------------------------------------------------------------

TEST_F(RunBadInput, MissingDataset) {
    write_embeddings();
    expect_rejected({"--dataset", "/nope"}, kInvalidInput, {input_, "/nope", "--dataset", "not found"});
}

TEST_F(RunBadInput, DefaultDatasetMissing) {
    {
        const io::File file = io::File::create(input_);
        put_f32(file, "/x", {kN, kL, kD});
    }
    expect_rejected({}, kInvalidInput, {input_, "/embeddings", "/x"});
}

TEST_F(RunBadInput, DatasetIsAGroup) {
    {
        const io::File file = io::File::create(input_);
        put_f32(file, "/grp/x", {kN, kL, kD});
    }
    expect_rejected({"--dataset", "/grp"}, kInvalidInput, {input_, "/grp", "group"});
}

TEST_F(RunBadInput, DatasetOfRank2) {
    {
        const io::File file = io::File::create(input_);
        put_f32(file, "/embeddings", {kN, kL * kD});
    }
    expect_rejected({}, kInvalidInput, {input_, "/embeddings", "[4, 64]", "[N, L, d]"});
}

TEST_F(RunBadInput, IntegerDataset) {
    {
        const io::File file = io::File::create(input_);
        put(file, "/embeddings", io::Datatype::int32(), {kN, kL, kD}, std::vector<std::int32_t>(kN * kL * kD, 1));
    }
    expect_rejected({}, kInvalidInput, {input_, "/embeddings", "int32", "float32 or float64"});
}

// float16 and bfloat16 embeddings are read; a 2-byte float of another layout is not.
TEST_F(RunBadInput, HalfWidthFloatOfOtherLayout) {
    {
        const io::File file = io::File::create(input_);
        put(file, "/embeddings", other_half_width_float(), {kN, kL, kD},
            std::vector<std::uint16_t>(kN * kL * kD, 0x3C00));  // 1.0 in binary16
    }
    expect_rejected({}, kInvalidInput, {input_, "/embeddings", "float16(e6m9)", "float32 or float64"});
}

TEST_F(RunBadInput, StringDataset) {
    {
        const io::File file = io::File::create(input_);
        io::write_text_dataset(file, "/embeddings", "not numbers");
    }
    expect_rejected({}, kInvalidInput, {input_, "/embeddings", "string"});
}

TEST_F(RunBadInput, ScalarDataset) {
    {
        const io::File file = io::File::create(input_);
        put(file, "/embeddings", io::Datatype::float32(), {}, std::vector<float>{1.0f});
    }
    expect_rejected({}, kInvalidInput, {input_, "/embeddings", "rank 0"});
}

TEST_F(RunBadInput, NoSequences) {
    {
        const io::File file = io::File::create(input_);
        put_f32(file, "/embeddings", {0, kL, kD});
    }
    expect_rejected({}, kInvalidInput, {input_, "/embeddings", "N = 0"});
}

TEST_F(RunBadInput, ZeroWidthEmbeddings) {
    {
        const io::File file = io::File::create(input_);
        put_f32(file, "/embeddings", {kN, kL, 0});
    }
    expect_rejected({}, kInvalidInput, {input_, "/embeddings", "d = 0"});
}

// --- lengths ------------------------------------------------------------------------------

TEST_F(RunBadInput, LengthsOfFloatType) {
    {
        const io::File file = io::File::create(input_);
        put_f32(file, "/embeddings", {kN, kL, kD});
        put(file, "/lengths", io::Datatype::float32(), {kN}, std::vector<float>(kN, 8.0f));
    }
    expect_rejected({}, kInvalidInput, {input_, "/lengths", "float32", "integer"});
}

TEST_F(RunBadInput, LengthsOfWrongShape) {
    {
        const io::File file = io::File::create(input_);
        put_f32(file, "/embeddings", {kN, kL, kD});
        put_lengths(file, {8, 8, 8, 8, 8});
    }
    expect_rejected({}, kInvalidInput, {input_, "/lengths", "[5]", "[4]"});
}

TEST_F(RunBadInput, LengthsOfRank2) {
    {
        const io::File file = io::File::create(input_);
        put_f32(file, "/embeddings", {kN, kL, kD});
        put(file, "/lengths", io::Datatype::int32(), {kN, 1}, std::vector<std::int32_t>(kN, 8));
    }
    expect_rejected({}, kInvalidInput, {input_, "/lengths", "[4, 1]"});
}

TEST_F(RunBadInput, NegativeLength) {
    write_embeddings({8, -1, 8, 8});
    expect_rejected({}, kInvalidInput, {input_, "/lengths[1] = -1", "negative"});
}

TEST_F(RunBadInput, LengthBeyondL) {
    write_embeddings({8, 8, 9, 8});
    expect_rejected({}, kInvalidInput, {input_, "/lengths[2] = 9", "L = 8"});
}

TEST_F(RunBadInput, LengthsAsStrings) {
    {
        const io::File file = io::File::create(input_);
        put_f32(file, "/embeddings", {kN, kL, kD});
        io::write_text_dataset(file, "/lengths", "8 8 8 8");
    }
    expect_rejected({}, kInvalidInput, {input_, "/lengths", "integer"});
}

TEST_F(RunBadInput, NamedLengthsMissing) {
    write_embeddings();
    expect_rejected({"--lengths", "/valid"}, kInvalidInput, {input_, "/valid", "--lengths"});
}

// --- Q, K, V ------------------------------------------------------------------------------

TEST_F(RunBadInput, OnlyQueryGiven) {
    write_qkv({kN, kL, 8}, {kN, kL, 8}, {kN, kL, 8});
    expect_rejected({"--query", "/query"}, kUsage, {"--query", "--key", "--value"});
}

TEST_F(RunBadInput, DatasetTogetherWithQkv) {
    write_qkv({kN, kL, 8}, {kN, kL, 8}, {kN, kL, 8});
    expect_rejected({"--dataset", "/query", "--query", "/query", "--key", "/key", "--value", "/value"}, kUsage,
                    {"--dataset", "--query"});
}

TEST_F(RunBadInput, WeightsWithQkv) {
    write_qkv({kN, kL, 8}, {kN, kL, 8}, {kN, kL, 8});
    write_weights({});
    expect_rejected({"--weights", weights_, "--query", "/query", "--key", "/key", "--value", "/value"}, kUsage,
                    {"--weights", "--query"});
}

TEST_F(RunBadInput, QkvWithDifferentN) {
    write_qkv({kN, kL, 8}, {kN - 1, kL, 8}, {kN, kL, 8});
    expect_rejected({"--query", "/query", "--key", "/key", "--value", "/value"}, kInvalidInput,
                    {input_, "/key", "N = 3", "/query"});
}

TEST_F(RunBadInput, KeyAndValueWithDifferentL) {
    write_qkv({kN, kL, 8}, {kN, kL, 8}, {kN, kL - 2, 8});
    expect_rejected({"--query", "/query", "--key", "/key", "--value", "/value"}, kInvalidInput,
                    {input_, "/value", "L = 6", "/key"});
}

TEST_F(RunBadInput, QueryAndKeyWithDifferentDk) {
    write_qkv({kN, kL, 8}, {kN, kL, 6}, {kN, kL, 8});
    expect_rejected({"--query", "/query", "--key", "/key", "--value", "/value"}, kInvalidInput,
                    {input_, "/key", "H*d_k = 6"});
}

TEST_F(RunBadInput, PackedAxisNotDivisibleByHeads) {
    write_qkv({kN, kL, 6}, {kN, kL, 6}, {kN, kL, 6});
    expect_rejected({"--query", "/query", "--key", "/key", "--value", "/value", "--heads", "4"}, kUsage,
                    {"--heads 4", "/query", "6"});
}

TEST_F(RunBadInput, SplitLayoutHeadsDisagree) {
    write_qkv({kN, 2, kL, 4}, {kN, 2, kL, 4}, {kN, 2, kL, 4});
    expect_rejected({"--query", "/query", "--key", "/key", "--value", "/value", "--heads", "4"}, kUsage,
                    {"--heads 4", "/query", "H = 2"});
}

TEST_F(RunBadInput, SplitLayoutHeadsDifferBetweenQueryAndKey) {
    write_qkv({kN, 2, kL, 4}, {kN, 4, kL, 4}, {kN, 2, kL, 4});
    expect_rejected({"--query", "/query", "--key", "/key", "--value", "/value"}, kInvalidInput,
                    {input_, "/key", "H = 4"});
}

TEST_F(RunBadInput, QkvOfRank5) {
    write_qkv({kN, 2, kL, 2, 2}, {kN, 2, kL, 2, 2}, {kN, 2, kL, 2, 2});
    expect_rejected({"--query", "/query", "--key", "/key", "--value", "/value"}, kInvalidInput,
                    {input_, "/query", "rank 5"});
}

// --- heads ----------------------------------------------------------------------------------

TEST_F(RunBadInput, HeadsNotDividingD) {
    write_embeddings();
    expect_rejected({"--heads", "3"}, kUsage, {"--heads 3", "d = 8", "/embeddings"});
}

TEST_F(RunBadInput, ZeroHeads) {
    write_embeddings();
    expect_rejected({"--heads", "0"}, kUsage, {"--heads"});
}

// --- projection weights -------------------------------------------------------------------

TEST_F(RunBadInput, MissingWeightsFile) {
    write_embeddings();
    expect_rejected({"--weights", weights_}, kIo, {weights_, "--weights"});
}

TEST_F(RunBadInput, WeightsFileNotHdf5) {
    write_embeddings();
    write_text(weights_, "w_q = [[1, 2], [3, 4]]\n");
    expect_rejected({"--weights", weights_}, kInvalidInput, {weights_, "not an HDF5 file"});
}

TEST_F(RunBadInput, WeightsWithoutWq) {
    write_embeddings();
    {
        const io::File file = io::File::create(weights_);
        put_f32(file, "/w_k", {kD, 8});
        put_f32(file, "/w_v", {kD, 8});
    }
    expect_rejected({"--weights", weights_}, kInvalidInput, {weights_, "/w_q", "not found"});
}

TEST_F(RunBadInput, WqWithWrongRows) {
    write_embeddings();
    WeightShapes shapes;
    shapes.w_q = {6, 8};
    write_weights(shapes);
    expect_rejected({"--weights", weights_}, kInvalidInput, {weights_, "/w_q", "[6, 8]", "d = 8"});
}

TEST_F(RunBadInput, WkColumnsDisagreeWithWq) {
    write_embeddings();
    WeightShapes shapes;
    shapes.w_k = {kD, 4};
    shapes.b_k = {4};
    write_weights(shapes);
    expect_rejected({"--weights", weights_}, kInvalidInput, {weights_, "/w_k", "[8, 4]", "[8, 8]"});
}

TEST_F(RunBadInput, WvWithWrongRows) {
    write_embeddings();
    WeightShapes shapes;
    shapes.w_v = {4, 8};
    write_weights(shapes);
    expect_rejected({"--weights", weights_}, kInvalidInput, {weights_, "/w_v", "[4, 8]"});
}

TEST_F(RunBadInput, WoWithWrongRows) {
    write_embeddings();
    WeightShapes shapes;
    shapes.w_o = {6, kD};
    write_weights(shapes);
    expect_rejected({"--weights", weights_}, kInvalidInput, {weights_, "/w_o", "[6, 8]", "H*d_v = 8"});
}

TEST_F(RunBadInput, BiasOfWrongSize) {
    write_embeddings();
    WeightShapes shapes;
    shapes.b_q = {7};
    write_weights(shapes);
    expect_rejected({"--weights", weights_}, kInvalidInput, {weights_, "/b_q", "[7]", "[8]"});
}

TEST_F(RunBadInput, OutputBiasWithoutWo) {
    write_embeddings();
    WeightShapes shapes;
    shapes.with_w_o = false;
    write_weights(shapes);
    expect_rejected({"--weights", weights_}, kInvalidInput, {weights_, "/b_o", "/w_o"});
}

TEST_F(RunBadInput, WeightsColumnsNotDivisibleByHeads) {
    write_embeddings();
    WeightShapes shapes;
    shapes.w_q = shapes.w_k = {kD, 6};
    shapes.b_q = shapes.b_k = {6};
    write_weights(shapes);
    expect_rejected({"--weights", weights_, "--heads", "4"}, kUsage, {"--heads 4", "/w_q"});
}

// --- finiteness -----------------------------------------------------------------------------

TEST_F(RunBadInput, NanInEmbeddingsNamesTheIndex) {
    {
        const io::File file = io::File::create(input_);
        std::vector<float> x = pattern<float>({kN, kL, kD});
        x[(2 * kL + 3) * kD + 5] = std::numeric_limits<float>::quiet_NaN();
        put(file, "/embeddings", io::Datatype::float32(), {kN, kL, kD}, x);
    }
    expect_rejected({}, kInvalidInput, {input_, "/embeddings", "nan", "[2, 3, 5]"});
}

TEST_F(RunBadInput, InfInEmbeddings) {
    {
        const io::File file = io::File::create(input_);
        std::vector<float> x = pattern<float>({kN, kL, kD});
        x[(1 * kL + 0) * kD + 7] = -std::numeric_limits<float>::infinity();
        put(file, "/embeddings", io::Datatype::float32(), {kN, kL, kD}, x);
    }
    expect_rejected({}, kInvalidInput, {input_, "/embeddings", "inf", "[1, 0, 7]"});
}

// Padding is data too: a NaN past a sequence's length is still refused.
TEST_F(RunBadInput, NanInPaddingOfARaggedSequence) {
    {
        const io::File file = io::File::create(input_);
        std::vector<float> x = pattern<float>({kN, kL, kD});
        x[(3 * kL + 7) * kD + 0] = std::numeric_limits<float>::quiet_NaN();
        put(file, "/embeddings", io::Datatype::float32(), {kN, kL, kD}, x);
        put_lengths(file, {8, 8, 8, 2});
    }
    expect_rejected({}, kInvalidInput, {input_, "/embeddings", "[3, 7, 0]"});
}

TEST_F(RunBadInput, Float64BeyondFloat32Range) {
    {
        const io::File file = io::File::create(input_);
        std::vector<double> x = pattern<double>({kN, kL, kD});
        x[5] = 1e300;
        put(file, "/embeddings", io::Datatype::float64(), {kN, kL, kD}, x);
    }
    expect_rejected({}, kInvalidInput, {input_, "/embeddings", "[0, 0, 5]", "float32"});
}

TEST_F(RunBadInput, NanInAWeightsMatrix) {
    write_embeddings();
    {
        const io::File file = io::File::create(weights_);
        put_f32(file, "/w_q", {kD, 8});
        put_f32(file, "/w_k", {kD, 8});
        std::vector<float> w_v = pattern<float>({kD, 8});
        w_v[3 * 8 + 1] = std::numeric_limits<float>::quiet_NaN();
        put(file, "/w_v", io::Datatype::float32(), {kD, 8}, w_v);
    }
    expect_rejected({"--weights", weights_}, kInvalidInput, {weights_, "/w_v", "nan", "[3, 1]"});
}

TEST_F(RunBadInput, NanInQuery) {
    {
        const io::File file = io::File::create(input_);
        std::vector<float> q = pattern<float>({kN, kL, 8});
        q[kL * 8 * 3] = std::numeric_limits<float>::quiet_NaN();
        put(file, "/query", io::Datatype::float32(), {kN, kL, 8}, q);
        put_f32(file, "/key", {kN, kL, 8});
        put_f32(file, "/value", {kN, kL, 8});
    }
    expect_rejected({"--query", "/query", "--key", "/key", "--value", "/value"}, kInvalidInput,
                    {input_, "/query", "[3, 0, 0]"});
}

// --- options --------------------------------------------------------------------------------

TEST_F(RunBadInput, UnknownOption) {
    write_embeddings();
    expect_rejected({"--bogus-option", "1"}, kUsage, {"--bogus-option"});
}

TEST_F(RunBadInput, MissingInputOption) {
    write_embeddings();
    expect_rejected_args({"run", "--output", output_}, kUsage, {"--input"});
}

TEST_F(RunBadInput, MissingOutputOption) {
    write_embeddings();
    expect_rejected_args({"run", "--input", input_}, kUsage, {"--output"});
}

TEST_F(RunBadInput, BadSaveWeights) {
    write_embeddings();
    expect_rejected({"--save-weights", "some"}, kUsage, {"--save-weights", "some"});
}

TEST_F(RunBadInput, BadWeightsDtype) {
    write_embeddings();
    expect_rejected({"--weights-dtype", "bf16"}, kUsage, {"--weights-dtype", "bf16"});
}

TEST_F(RunBadInput, BadCompression) {
    write_embeddings();
    expect_rejected({"--compression", "gzip:0"}, kUsage, {"--compression", "gzip:0"});
}

TEST_F(RunBadInput, UnknownCompression) {
    write_embeddings();
    expect_rejected({"--compression", "lz4"}, kUsage, {"--compression", "lz4"});
}

TEST_F(RunBadInput, WeightsSeqsEndPastN) {
    write_embeddings();
    expect_rejected({"--weights-seqs", "2:9"}, kUsage, {"--weights-seqs", "N = 4"});
}

TEST_F(RunBadInput, WeightsSeqsReversed) {
    write_embeddings();
    expect_rejected({"--weights-seqs", "5:2"}, kUsage, {"--weights-seqs", "5:2"});
}

// "3" alone is a RANGE now (the sequence 3, as everywhere else); "3..5" is no range at all.
TEST_F(RunBadInput, WeightsSeqsNotARange) {
    write_embeddings();
    expect_rejected({"--weights-seqs", "3..5"}, kUsage, {"--weights-seqs", "'3..5'"});
}

TEST_F(RunBadInput, MaxMemoryBelowOneSequence) {
    write_embeddings();
    expect_rejected({"--max-memory", "1M"}, kUsage, {"--max-memory", "one sequence"});
}

TEST_F(RunBadInput, MaxMemoryMalformed) {
    write_embeddings();
    expect_rejected({"--max-memory", "lots"}, kUsage, {"--max-memory", "lots"});
}

TEST_F(RunBadInput, MaxMemoryUnknownSuffix) {
    write_embeddings();
    expect_rejected({"--max-memory", "12Q"}, kUsage, {"--max-memory", "12Q"});
}

TEST_F(RunBadInput, MaxMemoryNegative) {
    write_embeddings();
    expect_rejected({"--max-memory=-4G"}, kUsage, {"--max-memory", "-4G"});
}

// Found by fuzz/fuzz_options: a positive size below one byte truncated to 0.
TEST_F(RunBadInput, MaxMemoryBelowOneByte) {
    write_embeddings();
    expect_rejected({"--max-memory", "0.1"}, kUsage, {"--max-memory", "'0.1' is not a positive size"});
}

TEST_F(RunBadInput, NegativeScale) {
    write_embeddings();
    expect_rejected({"--scale=-1"}, kUsage, {"--scale"});
}

// Tens of thousands of threads made libgomp abort over several lines (exit 1) and left
// OUTPUT.partial behind; bench and the Python binding crashed.
TEST_F(RunBadInput, ThreadsBeyondAnyNode) {
    write_embeddings();
    expect_rejected({"--threads", "100000"}, kUsage, {"--threads 100000", "up to 1024"});
    expect_rejected({"--threads", "100000", "--dry-run"}, kUsage, {"--threads 100000", "up to 1024"});
    const Outcome bench = attnbatch({"bench", "--threads", "100000"});
    EXPECT_EQ(bench.status, kUsage) << bench.err;
    EXPECT_EQ(bench.err, "attnbatch bench: error: --threads 100000: expected 0 (automatic) or a count up to 1024\n");
}

TEST_F(RunBadInput, HeadsNotANumber) {
    write_embeddings();
    expect_rejected({"--heads", "two"}, kUsage, {"heads", "two"});
}

// Enumerated options with a value outside their set: exit 2, the option named.
class RunBadEnumOption : public RunBadInput, public ::testing::WithParamInterface<const char*> {};

TEST_P(RunBadEnumOption, IsAUsageError) {
    write_embeddings();
    const std::string option = GetParam();
    expect_rejected_args({"run", "--input", input_, "--output", output_, option, "nonsense"}, kUsage, {option, "nonsense"});
}

INSTANTIATE_TEST_SUITE_P(Options, RunBadEnumOption,
                         ::testing::Values("--io", "--schedule", "--progress", "--kernel", "--isa"),
                         [](const ::testing::TestParamInfo<const char*>& param) {
                             std::string name;
                             for (const char* c = param.param; *c; ++c) {
                                 if (std::isalnum(static_cast<unsigned char>(*c))) name += *c;
                             }
                             return name;
                         });

// --- config files ---------------------------------------------------------------------------

TEST_F(RunBadInput, ConfigWithUnknownKey) {
    write_embeddings();
    const std::string config = dir_.file("job.ini");
    write_text(config, "heads = 2\nbogus-key = 1\n");
    expect_rejected({"--config", config}, kUsage, {config, "bogus-key"}, {config});
}

TEST_F(RunBadInput, ConfigWithUnknownKeyInRunSection) {
    write_embeddings();
    const std::string config = dir_.file("job.ini");
    write_text(config, "[generate]\nseq-len = 8\n[run]\nheads = 2\nbogus-key = 1\n");
    expect_rejected({"--config", config}, kUsage, {config, "bogus-key"}, {config});
}

TEST_F(RunBadInput, ConfigWithBadNumber) {
    write_embeddings();
    const std::string config = dir_.file("job.ini");
    write_text(config, "[run]\nheads = four\n");
    expect_rejected({"--config", config}, kUsage, {config, "heads", "four"}, {config});
}

TEST_F(RunBadInput, ConfigWithBadMaxMemory) {
    write_embeddings();
    const std::string config = dir_.file("job.ini");
    write_text(config, "[run]\nmax-memory = plenty\n");
    expect_rejected({"--config", config}, kUsage, {"--max-memory", "plenty"}, {config});
}

TEST_F(RunBadInput, ConfigWithUnterminatedSection) {
    write_embeddings();
    const std::string config = dir_.file("job.ini");
    write_text(config, "[run\nheads = 2\n");
    expect_rejected({"--config", config}, kUsage, {config, ":1"}, {config});
}

TEST_F(RunBadInput, ConfigFileMissing) {
    write_embeddings();
    expect_rejected({"--config", dir_.file("nope.ini")}, kUsage, {"--config", dir_.file("nope.ini")});
}

// --- the output path ------------------------------------------------------------------------

TEST_F(RunBadInput, OutputExistsWithoutForce) {
    write_embeddings();
    write_text(output_, "precious results, not to be overwritten\n");
    expect_rejected({}, kUsage, {output_, "--force"});
}

TEST_F(RunBadInput, PartialOutputExistsWithoutForceOrResume) {
    write_embeddings();
    write_text(output_ + ".partial", "an interrupted run's partial output\n");
    expect_rejected({}, kUsage, {output_ + ".partial"});
}

// docs/formats.md: a clear error, non-zero, nothing left behind; `run` classes it as I/O (4).
TEST_F(RunBadInput, OutputDirectoryMissing) {
    write_embeddings();
    output_ = dir_.file("no/such/dir/out.h5");
    expect_rejected({}, kIo, {dir_.file("no/such/dir")});
    EXPECT_FALSE(exists(dir_.file("no")));
}

// docs/formats.md: the input is never modified. --force allows replacing an earlier OUTPUT, not the
// very file the run reads: naming the input (or the weights) as --output is a usage error.
TEST_F(RunBadInput, OutputIsTheInputEvenWithForce) {
    write_embeddings();
    output_ = input_;
    expect_rejected({"--force"}, kUsage, {"--output", input_});
}

TEST_F(RunBadInput, OutputIsTheInputSpelledDifferentlyEvenWithForce) {
    write_embeddings();
    output_ = dir_.path() + "/./in.h5";
    expect_rejected({"--force"}, kUsage, {"--output"});
}

TEST_F(RunBadInput, OutputIsTheWeightsFileEvenWithForce) {
    write_embeddings();
    write_weights({});
    output_ = weights_;
    expect_rejected({"--weights", weights_, "--force"}, kUsage, {"--output", weights_});
}

// --output naming a directory: refused before anything is written (the digest helpers do
// not apply to a directory, hence the assertions spelled out here).
void expect_directory_output_refused(const std::string& input, const std::string& output,
                                     const std::string& directory, bool force) {
    const std::string input_digest = digest(input);
    const std::set<std::string> files_before = listing(directory);
    Args args{"run", "--input", input, "--output", output, "--progress", "never"};
    if (force) args.push_back("--force");
    const Outcome run = attnbatch(args, kMpiEnv);
    EXPECT_TRUE(run.status == kUsage || run.status == kIo) << "exit " << run.status << "\n" << run.out << run.err;
    EXPECT_EQ(line_count(run.err), 1u) << run.err;
    expect_mentions(run.err, output);
    EXPECT_TRUE(std::filesystem::is_directory(output));
    EXPECT_TRUE(std::filesystem::is_empty(output));
    EXPECT_FALSE(exists(output + ".partial")) << "OUTPUT.partial left behind";
    EXPECT_EQ(digest(input), input_digest);
    EXPECT_EQ(listing(directory), files_before) << "the run left files behind";
}

TEST_F(RunBadInput, OutputIsADirectory) {
    write_embeddings();
    std::filesystem::create_directory(output_);
    expect_directory_output_refused(input_, output_, dir_.path(), false);
}

// With --force, `run` computes everything, then fails to rename OUTPUT.partial over the
// directory (exit 4) and leaves OUTPUT.partial behind: it should refuse up front.
TEST_F(RunBadInput, OutputIsADirectoryEvenWithForce) {
    write_embeddings();
    std::filesystem::create_directory(output_);
    expect_directory_output_refused(input_, output_, dir_.path(), true);
}

}  // namespace
}  // namespace attnbatch::testing
