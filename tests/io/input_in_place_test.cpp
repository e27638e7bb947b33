// Input rows read where they lie in the file (InputReader::read_in_place): the same values as
// the copy, only where the stored bytes are float32 in one run from a cache line on, checked
// for non-finite values like the copy, unmapped once a block is read again, and a file
// shortened under its mapping (an HDF5 input's or a .npy shard's) ends the process with one
// line and exit 4 instead of a bus error.
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"

#include "attnbatch/error.hpp"
#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/io/input/npy_file.hpp"
#include "input/mapped_floats.hpp"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

namespace attnbatch::io {
namespace {

using testing::put;

// Objects of 4 KiB and more start on a page: what a file written with such an alignment (or
// h5py's first dataset, at 2048) gives.
File aligned_file(const std::string& path) {
    FileTuning tuning;
    tuning.alignment = 4096;
    return File::create(path, {}, tuning);
}

std::vector<float> values_of(InputBlock::InPlace rows) { return std::vector<float>(rows.data, rows.data + rows.count); }

InputSpec spec_of(const std::string& path, const std::string& dataset = {}) {
    InputOptions options;
    options.input_path = path;
    options.dataset = dataset;
    return describe_input(options);
}

TEST(InputInPlace, ContiguousFloat32RowsAreReadWhereTheyLieWithTheCopysValues) {
    const testing::TempDir dir;
    const std::string path = dir.file("in.h5");
    const std::vector<float> x = testing::ramp(6 * 16 * 8);
    {
        const File file = aligned_file(path);
        put(file, "/embeddings", Datatype::float32(), {6, 16, 8}, x);
    }
    const InputSpec spec = spec_of(path);
    InputReader copying(spec), in_place(spec);
    in_place.read_in_place(true);
    InputBlock copied, mapped;
    copying.read(2, 5, copied);
    in_place.read(2, 5, mapped);
    EXPECT_EQ(copied.x_in_place.data, nullptr);
    ASSERT_NE(mapped.x_in_place.data, nullptr);
    EXPECT_TRUE(mapped.x.empty()) << "rows read in place are not copied too";
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(mapped.x_in_place.data) % 64, 0u);
    ASSERT_EQ(copied.x.size(), 3u * 16u * 8u);
    EXPECT_EQ(values_of(mapped.x_in_place), copied.x);
    EXPECT_EQ(mapped.lengths, copied.lengths);
    // What a caller sends on: the vectors, as a copying read leaves them.
    mapped.copy_in_place();
    EXPECT_EQ(mapped.x_in_place.data, nullptr);
    EXPECT_EQ(mapped.x, copied.x);
    // A piece is always copied, and clears what the read before left in place.
    in_place.read_piece(1, 4, 8, 16, mapped);
    EXPECT_EQ(mapped.x_in_place.data, nullptr);
    EXPECT_EQ(mapped.x, std::vector<float>(x.begin() + 128, x.begin() + 256));
    in_place.read_in_place(false);
    in_place.read(0, 1, mapped);
    EXPECT_EQ(mapped.x_in_place.data, nullptr);
    EXPECT_EQ(mapped.x, std::vector<float>(x.begin(), x.begin() + 128));
}

TEST(InputInPlace, PackedRowsAndEachOfQKVInPlace) {
    const testing::TempDir dir;
    const std::string packed = dir.file("packed.h5"), qkv = dir.file("qkv.h5");
    const std::vector<float> tokens = testing::ramp(40 * 16);
    {
        const File file = aligned_file(packed);
        put(file, "/tokens", Datatype::float32(), {40, 16}, tokens);
        put(file, "/offsets", Datatype::int64(), {4}, std::vector<std::int64_t>{0, 12, 30, 40});
    }
    InputReader packed_reader(spec_of(packed));
    packed_reader.read_in_place(true);
    InputBlock block;
    packed_reader.read(1, 3, block);
    ASSERT_NE(block.x_in_place.data, nullptr);
    EXPECT_EQ(values_of(block.x_in_place),
              std::vector<float>(tokens.begin() + 12 * 16, tokens.end()));
    EXPECT_EQ(block.offsets, (std::vector<std::int64_t>{0, 18, 28}));

    const std::vector<float> q = testing::ramp(4 * 2 * 16 * 8);
    {
        const File file = aligned_file(qkv);
        put(file, "/q", Datatype::float32(), {4, 2, 16, 8}, q);
        put(file, "/k", Datatype::float32(), {4, 2, 16, 8}, q);
        put(file, "/v", Datatype::float64(), {4, 2, 16, 8}, std::vector<double>(q.begin(), q.end()));
    }
    InputOptions options;
    options.input_path = qkv;
    options.query = "/q";
    options.key = "/k";
    options.value = "/v";
    InputReader reader(describe_input(options));
    reader.read_in_place(true);
    reader.read(3, 4, block);
    const std::vector<float> last(q.begin() + 3 * 256, q.end());
    ASSERT_NE(block.q_in_place.data, nullptr);
    ASSERT_NE(block.k_in_place.data, nullptr);
    EXPECT_EQ(block.v_in_place.data, nullptr) << "float64 is converted, so copied";
    EXPECT_EQ(values_of(block.q_in_place), last);
    EXPECT_EQ(values_of(block.k_in_place), last);
    EXPECT_EQ(block.v, last);
}

// The process's file pages mapped now (kB), from /proc/self/status.
long rss_file_kb() {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
        if (line.rfind("RssFile:", 0) == 0) return std::stol(line.substr(8));
    }
    return -1;
}

TEST(InputInPlace, AStepsRowsAreUnmappedWhenItsBlockIsReadAgain) {
    // 16 MiB of input read in 1 MiB steps into two blocks by turns, as a run's two slots are:
    // what stays mapped is about the last two steps, not everything read.
    const testing::TempDir dir;
    const std::string path = dir.file("in.h5");
    {
        const File file = aligned_file(path);
        put(file, "/embeddings", Datatype::float32(), {256, 64, 256}, std::vector<float>(256 * 64 * 256, 0.5f));
    }
    InputReader reader(spec_of(path));
    reader.read_in_place(true);
    InputBlock blocks[2];
    const long before = rss_file_kb();
    ASSERT_GE(before, 0) << "no RssFile in /proc/self/status";
    for (int step = 0; step < 16; ++step) {
        InputBlock& block = blocks[step % 2];
        reader.read(step * 16, step * 16 + 16, block);
        ASSERT_NE(block.x_in_place.data, nullptr);
        ASSERT_EQ(block.x_in_place.count, 16u * 64u * 256u);
        EXPECT_EQ(block.x_in_place.data[block.x_in_place.count - 1], 0.5f);
    }
    const long grown = rss_file_kb() - before;
    EXPECT_LE(grown, 3 * 1024) << "kB of file pages still mapped after 16 steps of 1 MiB";
    EXPECT_GE(grown, 1024) << "the last two steps' pages are mapped";
    blocks[0].copy_in_place();  // copied, then unmapped too
    EXPECT_EQ(blocks[0].x.size(), 16u * 64u * 256u);
    EXPECT_LE(rss_file_kb() - before, 2 * 1024);
}

TEST(InputInPlace, OnlyFloat32InOneRunFromACacheLine) {
    const testing::TempDir dir;
    const std::string path = dir.file("in.h5");
    {
        const File file = aligned_file(path);
        put(file, "/contiguous", Datatype::float32(), {4, 16, 16}, testing::ramp(1024));
        put(file, "/double", Datatype::float64(), {4, 16, 16}, testing::ramp64(1024));
        put(file, "/half", Datatype::float16(), {4, 16, 16}, std::vector<std::uint16_t>(1024, 0x3c00));
        DatasetCreation chunked;
        chunked.chunk = {1, 16, 16};
        const Dataset dataset = Dataset::create(file, "/chunked", Datatype::float32(), {4, 16, 16}, chunked);
        const std::vector<float> values = testing::ramp(1024);
        write_slab(dataset, Slab{}, values.data(), values.size());
        // Never written: no storage allocated, nothing to map.
        Dataset::create(file, "/unwritten", Datatype::float32(), {4, 16, 16});
    }
    const File file = File::open(path, FileMode::read_only);
    EXPECT_TRUE(detail::MappedFloats::of(path, Dataset::open(file, "/contiguous")).has_value());
    for (const char* name : {"/double", "/half", "/chunked", "/unwritten"}) {
        EXPECT_FALSE(detail::MappedFloats::of(path, Dataset::open(file, name)).has_value()) << name;
    }
    // Off a cache line: HDF5 places small raw data side by side (h5py's defaults do too), so
    // without an alignment the second dataset starts 12 bytes past the first.
    const std::string unaligned = dir.file("unaligned.h5");
    const std::vector<float> values = testing::ramp(4 * 16 * 16);
    {
        const File written = File::create(unaligned);
        put(written, "/small", Datatype::float32(), {3}, std::vector<float>{1, 2, 3});
        put(written, "/embeddings", Datatype::float32(), {4, 16, 16}, values);
    }
    {
        const File unaligned_file = File::open(unaligned, FileMode::read_only);
        const Dataset off_line = Dataset::open(unaligned_file, "/embeddings");
        ASSERT_TRUE(off_line.contiguous_offset().has_value());
        ASSERT_NE(*off_line.contiguous_offset() % 64, 0u) << "the test needs data off a cache line";
        EXPECT_FALSE(detail::MappedFloats::of(unaligned, off_line).has_value());
    }
    InputReader reader(spec_of(unaligned));
    reader.read_in_place(true);
    InputBlock block;
    reader.read(1, 3, block);
    EXPECT_EQ(block.x_in_place.data, nullptr);
    EXPECT_EQ(block.x, std::vector<float>(values.begin() + 256, values.begin() + 768));
    // A file shorter than the dataset says (cut after it was written): not mapped.
    const std::string cut = dir.file("cut.h5");
    {
        const File written = aligned_file(cut);
        put(written, "/embeddings", Datatype::float32(), {4, 16, 16}, testing::ramp(1024));
    }
    const File cut_file = File::open(cut, FileMode::read_only);
    const Dataset cut_data = Dataset::open(cut_file, "/embeddings");
    ASSERT_EQ(::truncate(cut.c_str(), static_cast<off_t>(*cut_data.contiguous_offset() + 100)), 0);
    EXPECT_FALSE(detail::MappedFloats::of(cut, cut_data).has_value());
}

TEST(InputInPlace, NonFiniteValuesInPlaceAreFoundAsInACopy) {
    const testing::TempDir dir;
    const std::string path = dir.file("in.h5");
    std::vector<float> x = testing::ramp(6 * 16 * 8);
    x[3 * 128 + 17] = std::numeric_limits<float>::quiet_NaN();
    {
        const File file = aligned_file(path);
        put(file, "/embeddings", Datatype::float32(), {6, 16, 8}, x);
    }
    InputOptions options;
    options.input_path = path;
    options.check_finite = false;  // the reads check, as a run's do
    InputReader reader(describe_input(options));
    reader.read_in_place(true);
    reader.check_values(true);
    InputBlock block;
    reader.read(0, 3, block);
    EXPECT_NE(block.x_in_place.data, nullptr);
    try {
        reader.read(2, 5, block);
        FAIL() << "a NaN in sequence 3 went unnoticed";
    } catch (const Error& error) {
        EXPECT_EQ(error.exit_code(), exit_invalid_input);
        EXPECT_NE(std::string(error.what()).find("sequences [2, 5)"), std::string::npos) << error.what();
    }
}

TEST(InputInPlaceDeathTest, AFileShortenedUnderItsMappingEndsTheRunWithOneLineAndExit4) {
    const testing::TempDir dir;
    const std::string path = dir.file("in.h5");
    {
        const File file = aligned_file(path);
        put(file, "/embeddings", Datatype::float32(), {64, 64, 16}, testing::ramp(64 * 64 * 16));
    }
    EXPECT_EXIT(
        {
            const File file = File::open(path, FileMode::read_only);
            const std::optional<detail::MappedFloats> mapped = detail::MappedFloats::of(path, Dataset::open(file, "/embeddings"));
            if (!mapped) std::_Exit(100);
            if (::truncate(path.c_str(), 0) != 0) std::_Exit(101);
            volatile float sum = 0;
            const float* rows = mapped->elements(0, mapped->size());
            for (std::uint64_t i = 0; i < mapped->size(); i += 1024) sum = sum + rows[i];
            std::_Exit(102);  // read what is gone without a fault
        },
        ::testing::ExitedWithCode(exit_io), "in.h5 changed while the run read it.*expected the input unchanged");
}

// A .npy file of version 1.0 as numpy.save writes it: magic, version, header length, the
// header padded so that the data start on a 64-byte bound, then the data.
void write_npy(const std::string& path, const std::string& descr, const std::string& shape, const void* data, std::size_t bytes) {
    std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    header.append(63 - (10 + header.size()) % 64, ' ');
    header += '\n';
    std::ofstream out(path, std::ios::binary);
    out.write("\x93NUMPY\x01\x00", 8);
    const char length[2] = {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
    out.write(length, 2);
    out << header;
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
}

TEST(InputInPlace, NpyShardRowsInPlaceWithinAFloat32Shard) {
    const testing::TempDir dir;
    // Three padded shards [n_i, L=8, d=4] of float32: little-endian, again, big-endian.
    const std::vector<float> first = testing::ramp(3 * 32), second = testing::ramp(5 * 32), third = testing::ramp(2 * 32);
    std::vector<std::uint32_t> swapped(third.size());
    std::memcpy(swapped.data(), third.data(), third.size() * 4);
    for (std::uint32_t& bits : swapped) bits = __builtin_bswap32(bits);
    write_npy(dir.file("part_0.npy"), "<f4", "(3, 8, 4)", first.data(), first.size() * 4);
    write_npy(dir.file("part_1.npy"), "<f4", "(5, 8, 4)", second.data(), second.size() * 4);
    write_npy(dir.file("part_2.npy"), ">f4", "(2, 8, 4)", swapped.data(), swapped.size() * 4);
    InputOptions options;
    options.input_path = dir.file("");
    InputReader reader(describe_input(options));
    InputReader copying(describe_input(options));
    reader.read_in_place(true);
    InputBlock mapped, copied;
    // Sequences 4-6 lie in part_1: in place.
    reader.read(4, 7, mapped);
    copying.read(4, 7, copied);
    ASSERT_NE(mapped.x_in_place.data, nullptr);
    EXPECT_EQ(values_of(mapped.x_in_place), copied.x);
    EXPECT_EQ(copied.x, std::vector<float>(second.begin() + 32, second.begin() + 128));
    // Across part_0 and part_1, or in the big-endian shard: copied.
    reader.read(2, 5, mapped);
    EXPECT_EQ(mapped.x_in_place.data, nullptr);
    copying.read(2, 5, copied);
    EXPECT_EQ(mapped.x, copied.x);
    reader.read(8, 10, mapped);
    EXPECT_EQ(mapped.x_in_place.data, nullptr);
    EXPECT_EQ(mapped.x, std::vector<float>(third.begin(), third.end()));
}

TEST(InputInPlaceDeathTest, AShortenedNpyShardLikewise) {
    const testing::TempDir dir;
    const std::string path = dir.file("shard.npy");
    const std::vector<float> ones(65536, 1.0f);
    write_npy(path, "<f4", "(65536,)", ones.data(), ones.size() * 4);
    EXPECT_EXIT(
        {
            const MappedNpy shard(read_npy_header(path, "--input"));
            if (::truncate(path.c_str(), 0) != 0) std::_Exit(101);
            volatile float sum = 0;
            const auto* values = reinterpret_cast<const float*>(shard.data());
            for (std::size_t i = 0; i < 65536; i += 1024) sum = sum + values[i];
            std::_Exit(102);
        },
        ::testing::ExitedWithCode(exit_io), "shard.npy changed while the run read it");
}

}  // namespace
}  // namespace attnbatch::io
