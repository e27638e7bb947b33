// Reading validated input: float64 arrives as float32, lengths as int32 (L when absent),
// Q/K/V as stored, and the projection weights.
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"

#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/io/models/weights_reader.hpp"

namespace attnbatch::io {
namespace {

using testing::put;

TEST(InputReader, EmbeddingsBlocksConvertFloat64AndLengths) {
    const testing::TempDir dir;
    const std::string path = dir.file("in.h5");
    const std::vector<double> x = testing::ramp64(5 * 3 * 4);
    {
        const File file = File::create(path);
        put(file, "/embeddings", Datatype::float64(), {5, 3, 4}, x);
        put(file, "/lengths", Datatype::int64(), {5}, std::vector<std::int64_t>{3, 2, 1, 0, 3});
    }
    InputOptions options;
    options.input_path = path;
    const InputSpec spec = describe_input(options);
    EXPECT_EQ(spec.dtype, DataType::float64);
    InputReader reader(spec);
    InputBlock block;
    reader.read(1, 4, block);
    EXPECT_EQ(block.first, 1);
    EXPECT_EQ(block.count, 3);
    ASSERT_EQ(block.x.size(), 3u * 12u);
    for (std::size_t i = 0; i < block.x.size(); ++i) EXPECT_EQ(block.x[i], static_cast<float>(x[12 + i]));
    EXPECT_EQ(block.lengths, (std::vector<std::int32_t>{2, 1, 0}));
    reader.read(5, 5, block);
    EXPECT_EQ(block.count, 0);
    EXPECT_TRUE(block.x.empty());
    EXPECT_THROW(reader.read(4, 6, block), std::invalid_argument);
}

TEST(InputReader, QkvBlocksAndDefaultLengths) {
    const testing::TempDir dir;
    const std::string path = dir.file("in.h5");
    const std::vector<float> q = testing::ramp(3 * 2 * 4 * 5);
    {
        const File file = File::create(path);
        put(file, "/q", Datatype::float32(), {3, 2, 4, 5}, q);
        put(file, "/k", Datatype::float32(), {3, 2, 4, 5}, q);
        put(file, "/v", Datatype::float32(), {3, 2, 4, 1}, testing::ramp(3 * 2 * 4));
    }
    InputOptions options;
    options.input_path = path;
    options.query = "/q";
    options.key = "/k";
    options.value = "/v";
    InputReader reader(describe_input(options));
    InputBlock block;
    reader.read(2, 3, block);
    EXPECT_EQ(block.q, std::vector<float>(q.begin() + 80, q.end()));
    EXPECT_EQ(block.k, block.q);
    EXPECT_EQ(block.v.size(), 8u);
    EXPECT_EQ(block.lengths, std::vector<std::int32_t>{4});
}

TEST(InputReader, ProjectionWeights) {
    const testing::TempDir dir;
    const std::string input = dir.file("in.h5");
    const std::string weights = dir.file("w.h5");
    {
        const File file = File::create(input);
        put(file, "/embeddings", Datatype::float32(), {2, 3, 4}, testing::ramp(24));
    }
    {
        const File file = File::create(weights);
        put(file, "/w_q", Datatype::float64(), {4, 2}, testing::ramp64(8));
        put(file, "/w_k", Datatype::float32(), {4, 2}, testing::ramp(8));
        put(file, "/w_v", Datatype::float32(), {4, 6}, testing::ramp(24));
        put(file, "/b_v", Datatype::float32(), {6}, testing::ramp(6));
    }
    InputOptions options;
    options.input_path = input;
    options.weights_path = weights;
    options.heads = 2;
    const InputSpec spec = describe_input(options);
    ASSERT_TRUE(spec.weights);
    EXPECT_EQ(spec.weights->dtype, DataType::float64);
    EXPECT_EQ(spec.d_out(), 6);
    const ProjectionWeights w = read_weights(*spec.weights);
    EXPECT_EQ(w.w_q, testing::ramp(8));
    EXPECT_EQ(w.w_k, testing::ramp(8));
    EXPECT_EQ(w.w_v, testing::ramp(24));
    EXPECT_TRUE(w.w_o.empty());
    EXPECT_TRUE(w.b_q.empty());
    EXPECT_EQ(w.b_v, testing::ramp(6));
}

}  // namespace
}  // namespace attnbatch::io
