// float16 and bfloat16 input data (docs/commands.md: `run --precision`): described with their dtype,
// read as the float32 values they hold (exactly: every 16-bit value is a float32), and scanned
// for non-finite values like wider data. bfloat16 is a 2-byte HDF5 float with binary32's
// sign and 8-bit exponent and a 7-bit mantissa (Datatype::bfloat16()).
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"

#include "attnbatch/error.hpp"
#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/kernels/bf16.hpp"
#include "attnbatch/kernels/half.hpp"

#include <cmath>
#include <limits>

namespace attnbatch::io {
namespace {

using testing::put;

// Bits of distinct values of both signs, with subnormals (half: 0x0001, bf16: 0x0001) and the
// largest finite values (0x7bff, 0x7f7f) among them.
std::vector<std::uint16_t> half_bits(std::size_t count) {
    std::vector<std::uint16_t> bits(count);
    for (std::size_t i = 0; i < count; ++i) bits[i] = static_cast<std::uint16_t>((i * 2654435761u >> 7) & 0x7bffu);
    bits[0] = 0x0001;
    bits[1] = 0x7bff;
    return bits;
}
std::vector<std::uint16_t> bf16_bits(std::size_t count) {
    std::vector<std::uint16_t> bits(count);
    for (std::size_t i = 0; i < count; ++i) bits[i] = static_cast<std::uint16_t>((i * 2654435761u >> 9) & 0xff7fu);
    bits[0] = 0x0001;
    bits[1] = 0x7f7f;
    return bits;
}

class HalfWidthInput : public ::testing::Test {
protected:
    testing::TempDir dir;
    const std::string input = dir.file("in.h5");
    const Dims dims{3, 5, 8};

    InputOptions embeddings_options() const {
        InputOptions o;
        o.input_path = input;
        return o;
    }
    std::vector<float> read_embeddings() const {
        const InputSpec spec = describe_input(embeddings_options());
        InputReader reader(spec);
        InputBlock block;
        reader.read(0, spec.n, block);
        return block.x;
    }
};

TEST_F(HalfWidthInput, Float16EmbeddingsReadAsTheirValues) {
    const std::vector<std::uint16_t> bits = half_bits(element_count(dims));
    {
        const File file = File::create(input);
        put(file, "/embeddings", Datatype::float16(), dims, bits);
    }
    EXPECT_EQ(describe_input(embeddings_options()).dtype, DataType::float16);
    const std::vector<float> x = read_embeddings();
    ASSERT_EQ(x.size(), bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) ASSERT_EQ(x[i], kernels::half_to_float(bits[i])) << i;
}

TEST_F(HalfWidthInput, Bfloat16EmbeddingsReadAsTheirValues) {
    const std::vector<std::uint16_t> bits = bf16_bits(element_count(dims));
    {
        const File file = File::create(input);
        const Dataset dataset = Dataset::create(file, "/embeddings", Datatype::bfloat16(), dims);
        write_slab(dataset, Slab{}, MemType::bf16_bits, bits.data(), bits.size());
    }
    const InputSpec spec = describe_input(embeddings_options());
    EXPECT_EQ(spec.dtype, DataType::bfloat16);
    EXPECT_STREQ(name_of(spec.dtype), "bfloat16");
    const std::vector<float> x = read_embeddings();
    ASSERT_EQ(x.size(), bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) ASSERT_EQ(x[i], kernels::bf16_to_float(bits[i])) << i;
}

// Q, K, V of different widths: the spec's dtype is the one that holds them all.
TEST_F(HalfWidthInput, MixedQkvTypesDescribeAsTheWidest) {
    const std::size_t count = element_count(dims);
    {
        const File file = File::create(input);
        put(file, "/q", Datatype::float16(), dims, half_bits(count));
        const Dataset k = Dataset::create(file, "/k", Datatype::bfloat16(), dims);
        const std::vector<std::uint16_t> kb = bf16_bits(count);
        write_slab(k, Slab{}, MemType::bf16_bits, kb.data(), kb.size());
        put(file, "/v", Datatype::float16(), dims, half_bits(count));
    }
    InputOptions o;
    o.input_path = input;
    o.query = "/q";
    o.key = "/k";
    o.value = "/v";
    EXPECT_EQ(describe_input(o).dtype, DataType::float32) << "float16 and bfloat16 together: float32 holds both";
}

// An infinity is as invalid in 16 bits as in 32, and is found at its index.
TEST_F(HalfWidthInput, NonFiniteHalfValuesAreRejected) {
    std::vector<std::uint16_t> bits = half_bits(element_count(dims));
    bits[2 * 40 + 3 * 8 + 5] = 0xfc00;  // -inf at [2, 3, 5]
    {
        const File file = File::create(input);
        put(file, "/embeddings", Datatype::float16(), dims, bits);
    }
    try {
        describe_input(embeddings_options());
        ADD_FAILURE() << "no Error";
    } catch (const Error& error) {
        const std::string message = error.what();
        EXPECT_EQ(error.exit_code(), exit_invalid_input) << message;
        EXPECT_NE(message.find("[2, 3, 5]"), std::string::npos) << message;
        EXPECT_NE(message.find("non-finite"), std::string::npos) << message;
    }
}

// Projection weights stay 32 or 64 bits: the projections are computed in fp32 from them.
TEST_F(HalfWidthInput, HalfWidthWeightsAreRejected) {
    const std::string weights = dir.file("w.h5");
    {
        const File file = File::create(input);
        put(file, "/embeddings", Datatype::float32(), {2, 4, 8}, testing::ramp(64));
        const File w = File::create(weights);
        put(w, "/w_q", Datatype::float16(), {8, 8}, half_bits(64));
        put(w, "/w_k", Datatype::float32(), {8, 8}, testing::ramp(64));
        put(w, "/w_v", Datatype::float32(), {8, 8}, testing::ramp(64));
    }
    InputOptions o = embeddings_options();
    o.weights_path = weights;
    try {
        describe_input(o);
        ADD_FAILURE() << "no Error";
    } catch (const Error& error) {
        const std::string message = error.what();
        EXPECT_EQ(error.exit_code(), exit_invalid_input) << message;
        EXPECT_NE(message.find("/w_q"), std::string::npos) << message;
        EXPECT_NE(message.find("float16"), std::string::npos) << message;
    }
}

}  // namespace
}  // namespace attnbatch::io
