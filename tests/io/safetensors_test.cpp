// The safetensors reader: tensors, dtypes converted to float32 exactly, and one clear error
// (exit 3) for each way a file can be wrong: too short, a header size past the file, a header
// that is not JSON, offsets that do not match the shape, data cut short.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "attnbatch/error.hpp"
#include "attnbatch/io/models/safetensors.hpp"
#include "support/temp_dir.hpp"

namespace attnbatch::io {
namespace {

std::string file_bytes(const std::string& header, const std::string& data) {
    std::string bytes(8, '\0');
    std::uint64_t size = header.size();
    for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>(size >> (8 * i) & 0xff);
    return bytes + header + data;
}

std::string write(const testing::TempDir& dir, const std::string& name, const std::string& bytes) {
    const std::string path = dir.file(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

template <class T>
std::string raw(const std::vector<T>& values) {
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// The error's exit code and message of opening `bytes` as a safetensors file.
std::pair<int, std::string> failure(const testing::TempDir& dir, const std::string& bytes) {
    try {
        SafetensorsFile file(write(dir, "bad.safetensors", bytes));
        for (const SafetensorsTensor& t : file.tensors()) file.read_floats(t);
    } catch (const Error& error) {
        return {error.exit_code(), error.what()};
    }
    return {0, ""};
}

TEST(Safetensors, ReadsTensorsAndConvertsHalfAndBfloat16Exactly) {
    const testing::TempDir dir;
    const std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 7.0f};
    const std::vector<std::uint16_t> f16 = {0x3c00, 0xc000, 0x3555};   // 1, -2, 0.333251953125
    const std::vector<std::uint16_t> bf16 = {0x3f80, 0xc040, 0x3eab};  // 1, -3, 0.333984375
    const std::string data = raw(f32) + raw(f16) + raw(bf16);
    const std::string header =
        R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
        R"("h":{"dtype":"F16","shape":[3],"data_offsets":[24,30]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[30,36]}})";
    const SafetensorsFile file(write(dir, "m.safetensors", file_bytes(header, data)));
    ASSERT_EQ(file.tensors().size(), 3u);
    EXPECT_EQ(file.metadata().at("format"), "pt");
    const SafetensorsTensor* w = file.find("w");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->shape, (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(file.read_floats(*w), f32);
    EXPECT_EQ(file.read_floats(*file.find("h")), (std::vector<float>{1.0f, -2.0f, 0.333251953125f}));
    EXPECT_EQ(file.read_floats(*file.find("b")), (std::vector<float>{1.0f, -3.0f, 0.333984375f}));
    EXPECT_EQ(file.find("absent"), nullptr);
}

TEST(Safetensors, EveryDamageIsOneInvalidInputError) {
    const testing::TempDir dir;
    const std::string data = raw(std::vector<float>{1, 2, 3, 4});
    const std::string good = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
    const struct {
        std::string bytes;
        std::string words;
    } cases[] = {
        {"abc", "too short"},
        {file_bytes(good, data).substr(0, 8) + "{", "truncated"},
        {file_bytes("not json at all", data), "not JSON"},
        {file_bytes("[1,2]", data), "not an object"},
        {file_bytes(R"({"w":{"dtype":"F32","shape":[5],"data_offsets":[0,16]}})", data), "do not hold its shape"},
        {file_bytes(R"({"w":{"dtype":"Q9","shape":[4],"data_offsets":[0,16]}})", data), "unknown dtype Q9"},
        {file_bytes(R"({"w":{"dtype":"F32","shape":[4]}})", data), "lacks dtype, shape or data_offsets"},
        {file_bytes(good, data.substr(0, 10)), "truncated"},
        {file_bytes(R"({"w":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", data), "expected F32, F16, BF16 or F64"},
        {std::string("\xff\xff\xff\xff\xff\xff\xff\x7f") + "{}", "100 MB"},
    };
    for (const auto& c : cases) {
        const auto [code, message] = failure(dir, c.bytes);
        EXPECT_EQ(code, exit_invalid_input) << c.words << ": " << message;
        EXPECT_NE(message.find(c.words), std::string::npos) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
}

TEST(Safetensors, AMissingFileIsAnIoError) {
    const testing::TempDir dir;
    try {
        SafetensorsFile file(dir.file("absent.safetensors"));
        FAIL() << "opened a missing file";
    } catch (const Error& error) {
        EXPECT_EQ(error.exit_code(), exit_io);
    }
}

}  // namespace
}  // namespace attnbatch::io
