// The input writer against the input reader: what write_input_files() writes, describe_input()
// accepts and InputReader/read_weights() read back value for value, in every layout; the
// refusals before anything is written, and no .partial left after a failure.
#include "support/file_bytes.hpp"
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"

#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/io/models/weights_reader.hpp"
#include "attnbatch/io/input/input_writer.hpp"

#include <sys/stat.h>

#include <stdexcept>

namespace attnbatch::io {
namespace {

bool exists(const std::string& path) {
    struct stat status {};
    return ::lstat(path.c_str(), &status) == 0;
}

// value(index) = the row-major position of `index` in `dims`, scaled to stay exact in float32:
// every element is distinct, so a misplaced one shows.
ValueSource positions(const Dims& dims, double scale = 0.5) {
    return [dims, scale](const Dims& index, std::size_t count, double* out) {
        std::uint64_t flat = 0;
        for (std::size_t axis = 0; axis < dims.size(); ++axis) flat = flat * dims[axis] + index[axis];
        for (std::size_t i = 0; i < count; ++i) out[i] = scale * static_cast<double>(flat + i);
    };
}

std::vector<float> expected_positions(std::size_t first, std::size_t count, double scale = 0.5) {
    std::vector<float> values(count);
    for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<float>(scale * static_cast<double>(first + i));
    return values;
}

GeneratorRecord record() {
    GeneratorRecord r;
    r.generator = "test writer";
    r.seed = 17;
    r.scale_values = 2.5;
    r.min_len = 1;
    return r;
}

// N = 4, L = 3, d = 6, H = 2, lengths 1..3.
InputContent embeddings_content() {
    InputContent content;
    content.n = 4;
    content.len = 3;
    content.heads = 2;
    content.d = 6;
    content.embeddings = positions({4, 3, 6});
    content.lengths = [](const Dims& index, std::size_t count, double* out) {
        for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<double>((index[0] + i) % 3 + 1);
    };
    return content;
}

// d = 6, H = 2, d_k = 2, d_v = 3, d_out = 5, every bias.
WeightsContent weights_content() {
    WeightsContent content;
    content.d = 6;
    content.heads = 2;
    content.d_k = 2;
    content.d_v = 3;
    content.d_out = 5;
    content.w_q = positions({6, 4}, 0.25);
    content.w_k = positions({6, 4}, 0.125);
    content.w_v = positions({6, 6}, 0.25);
    content.w_o = positions({6, 5}, 0.25);
    content.b_q = positions({4}, 1.0);
    content.b_k = positions({4}, 2.0);
    content.b_v = positions({6}, 1.0);
    content.b_o = positions({5}, 3.0);
    return content;
}

TEST(InputWriter, EmbeddingsLengthsAndWeightsRoundTrip) {
    const testing::TempDir dir;
    InputDestination destination;
    destination.path = dir.file("in.h5");
    destination.weights_path = dir.file("w.h5");
    destination.slab_bytes = 40;  // several slabs per sequence: the content must not depend on it
    const WrittenInput written = write_input_files(destination, embeddings_content(), weights_content(), record());
    ASSERT_EQ(written.input.size(), 2u);
    EXPECT_EQ(written.input[0].path, dataset::embeddings);
    EXPECT_EQ(written.input[0].dtype, "float32");
    EXPECT_EQ(written.input[0].dims, (Dims{4, 3, 6}));
    EXPECT_EQ(written.input[1].path, dataset::lengths);
    EXPECT_EQ(written.input[1].dtype, "int32");
    ASSERT_EQ(written.weights.size(), 8u);
    EXPECT_FALSE(exists(destination.path + ".partial"));
    EXPECT_FALSE(exists(destination.weights_path + ".partial"));

    InputOptions options;
    options.input_path = destination.path;
    options.weights_path = destination.weights_path;
    options.heads = 2;
    const InputSpec spec = describe_input(options);
    EXPECT_EQ(spec.mode, InputMode::embeddings);
    EXPECT_EQ(spec.n, 4);
    EXPECT_EQ(spec.len, 3);
    EXPECT_EQ(spec.d, 6);
    EXPECT_EQ(spec.lengths, dataset::lengths);
    EXPECT_EQ(spec.d_k, 2);
    EXPECT_EQ(spec.d_v, 3);
    EXPECT_EQ(spec.d_out(), 5);
    ASSERT_TRUE(spec.weights);
    EXPECT_TRUE(spec.weights->has_b_o);

    InputReader reader(spec);
    InputBlock block;
    reader.read(1, 3, block);
    EXPECT_EQ(block.x, expected_positions(18, 36));
    EXPECT_EQ(block.lengths, (std::vector<std::int32_t>{2, 3}));

    const ProjectionWeights w = read_weights(*spec.weights);
    EXPECT_EQ(w.w_q, expected_positions(0, 24, 0.25));
    EXPECT_EQ(w.w_k, expected_positions(0, 24, 0.125));
    EXPECT_EQ(w.w_o, expected_positions(0, 30, 0.25));
    EXPECT_EQ(w.b_o, expected_positions(0, 5, 3.0));

    const File file = File::open(destination.path, FileMode::read_only);
    EXPECT_EQ(get_text_attribute(file, attribute::format), format::input);
    EXPECT_EQ(get_text_attribute(file, attribute::generator), "test writer");
    EXPECT_EQ(get_int_attribute(file, attribute::seed), 17);
    EXPECT_EQ(get_int_attribute(file, attribute::heads), 2);
    EXPECT_EQ(get_text_attribute(file, attribute::layout), "embeddings");
    EXPECT_EQ(get_real_attribute(file, attribute::scale_values), 2.5);
    EXPECT_EQ(get_int_attribute(file, attribute::min_len), 1);
    EXPECT_EQ(dimension_labels(Dataset::open(file, dataset::embeddings)), (std::vector<std::string>{"N", "L", "d"}));
    const File weights = File::open(destination.weights_path, FileMode::read_only);
    EXPECT_EQ(get_text_attribute(weights, attribute::format), format::weights);
    EXPECT_EQ(get_int_attribute(weights, attribute::out_dim), 5);
}

TEST(InputWriter, QkvPackedAndSplitRoundTripInFloat64) {
    for (const QkvLayout layout : {QkvLayout::packed, QkvLayout::split}) {
        const testing::TempDir dir;
        const bool split = layout == QkvLayout::split;
        InputContent content;
        content.mode = InputMode::qkv;
        content.layout = layout;
        content.dtype = DataType::float64;
        content.n = 3;
        content.len = 4;
        content.heads = 2;
        content.d_k = 3;
        content.d_v = 1;
        const Dims qk = split ? Dims{3, 2, 4, 3} : Dims{3, 4, 6};
        const Dims v = split ? Dims{3, 2, 4, 1} : Dims{3, 4, 2};
        content.query = positions(qk);
        content.key = positions(qk, 0.25);
        content.value = positions(v);
        InputDestination destination;
        destination.path = dir.file("qkv.h5");
        const WrittenInput written = write_input_files(destination, content, std::nullopt, record());
        ASSERT_EQ(written.input.size(), 3u);
        EXPECT_EQ(written.input[2].path, dataset::value);
        EXPECT_EQ(written.input[2].dims, v);
        EXPECT_TRUE(written.weights.empty());

        InputOptions options;
        options.input_path = destination.path;
        options.query = dataset::query;
        options.key = dataset::key;
        options.value = dataset::value;
        if (!split) options.heads = 2;
        const InputSpec spec = describe_input(options);
        EXPECT_EQ(spec.layout, layout);
        EXPECT_EQ(spec.dtype, DataType::float64);
        EXPECT_EQ(spec.heads, 2);
        EXPECT_EQ(spec.d_k, 3);
        EXPECT_EQ(spec.d_v, 1);
        EXPECT_TRUE(spec.lengths.empty());
        InputReader reader(spec);
        InputBlock block;
        reader.read(2, 3, block);
        EXPECT_EQ(block.q, expected_positions(48, 24));
        EXPECT_EQ(block.k, expected_positions(48, 24, 0.25));
        EXPECT_EQ(block.v, expected_positions(16, 8));
        EXPECT_EQ(block.lengths, std::vector<std::int32_t>{4});
        const File file = File::open(destination.path, FileMode::read_only);
        EXPECT_EQ(get_text_attribute(file, attribute::layout), split ? "qkv-split" : "qkv-packed");
        EXPECT_EQ(get_int_attribute(file, attribute::head_dim), 3);
        EXPECT_EQ(get_text_attribute(file, attribute::dtype), "float64");
    }
}

TEST(InputWriter, RefusesBeforeWritingAnything) {
    const testing::TempDir dir;
    InputDestination destination;
    destination.path = dir.file("in.h5");
    destination.weights_path = dir.file("w.h5");
    testing::write_text(destination.weights_path, "keep me");
    try {
        write_input_files(destination, embeddings_content(), weights_content(), record());
        FAIL() << "an existing weights file was overwritten";
    } catch (const Error& error) {
        EXPECT_EQ(error.exit_code(), exit_usage);
        EXPECT_NE(std::string(error.what()).find("--weights-out"), std::string::npos) << error.what();
    }
    EXPECT_FALSE(exists(destination.path));
    EXPECT_EQ(testing::read_text(destination.weights_path), "keep me");

    destination.force = true;
    write_input_files(destination, embeddings_content(), weights_content(), record());
    EXPECT_TRUE(is_hdf5_file(destination.weights_path));
}

TEST(InputWriter, FailureLeavesNoPartialFile) {
    const testing::TempDir dir;
    InputContent content = embeddings_content();
    content.lengths = [](const Dims&, std::size_t, double*) { throw std::runtime_error("no more lengths"); };
    InputDestination destination;
    destination.path = dir.file("in.h5");
    EXPECT_THROW(write_input_files(destination, content, std::nullopt, record()), std::runtime_error);
    EXPECT_FALSE(exists(destination.path));
    EXPECT_FALSE(exists(destination.path + ".partial"));
}

TEST(InputWriter, PayloadBytes) {
    EXPECT_EQ(input_bytes(embeddings_content()), 4.0 * 3 * 6 * 4 + 4 * 4);
    EXPECT_EQ(weights_bytes(weights_content()), 4.0 * (6 * 4 * 2 + 6 * 6 + 6 * 5 + 4 + 4 + 6 + 5));
}

}  // namespace
}  // namespace attnbatch::io
