// Unreadable compressed chunks: which chunks a box overlaps, and their replacement by chunks
// of zeros that read back and can be written again, while every readable chunk stays as it was.
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"

#include "attnbatch/io/h5/chunk_indices.hpp"
#include "attnbatch/io/h5/chunk_repair.hpp"

#include <hdf5.h>

#include <cstdio>
#include <vector>

namespace attnbatch::io {
namespace {

using testing::TempDir;

TEST(ChunkIndices, ABoxAddsTheChunksItOverlaps) {
    const Dims dims{10, 4, 6}, chunk{3, 4, 4};
    ChunkIndices chunks;
    add_chunks_of(dims, chunk, Slab{{2, 0, 3}, {5, 4, 2}}, chunks);  // rows 2-6, columns 3-4
    EXPECT_EQ(chunks, (ChunkIndices{{0, 0, 0}, {0, 0, 1}, {1, 0, 0}, {1, 0, 1}, {2, 0, 0}, {2, 0, 1}}));

    ChunkIndices whole;
    add_chunks_of(dims, chunk, Slab{}, whole);
    EXPECT_EQ(whole.size(), 4u * 1u * 2u);  // 10 rows in 4 chunks (the last cut), 6 columns in 2

    ChunkIndices none;
    add_chunks_of(dims, chunk, Slab{{4, 0, 0}, {0, 4, 6}}, none);
    EXPECT_TRUE(none.empty());
}

// 10 rows of 5 in chunks of 4 rows, gzip: chunks at rows 0, 4 and 8 (the last cut to 2 rows).
constexpr int rows = 10, columns = 5, chunk_rows = 4;

std::vector<float> numbered() {
    std::vector<float> values(rows * columns);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = 1.0f + static_cast<float>(i);
    return values;
}

// Zeros the first bytes of the stored chunk at `row` (its zlib header): every read fails.
void damage_chunk(const std::string& path, hsize_t row) {
    hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dataset = H5Dopen2(file, "/x", H5P_DEFAULT);
    const hsize_t origin[2] = {row, 0};
    unsigned filters = 0;
    haddr_t address = HADDR_UNDEF;
    hsize_t size = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(dataset, origin, &filters, &address, &size), 0);
    H5Dclose(dataset);
    H5Fclose(file);
    std::FILE* raw = std::fopen(path.c_str(), "r+b");
    ASSERT_NE(raw, nullptr);
    std::fseek(raw, static_cast<long>(address), SEEK_SET);
    const std::vector<unsigned char> zeros(16, 0);
    std::fwrite(zeros.data(), 1, zeros.size(), raw);
    std::fclose(raw);
}

std::string compressed_file(const TempDir& dir) {
    const std::string path = dir.file("gz.h5");
    const File file = File::create(path);
    DatasetCreation creation;
    creation.chunk = {chunk_rows, columns};
    creation.gzip_level = 1;
    const Dataset dataset = Dataset::create(file, "/x", Datatype::float32(), {rows, columns}, creation);
    const std::vector<float> values = numbered();
    write_rows(dataset, 0, rows, values.data(), values.size());
    return path;
}

TEST(ChunkRepair, ReplacesOnlyTheUnreadableChunksWithZerosThatCanBeWrittenAgain) {
    const TempDir dir;
    const std::string path = compressed_file(dir);
    damage_chunk(path, 4);
    damage_chunk(path, 8);  // the edge chunk, 2 of its 4 rows inside the dataset

    const File file = File::open(path, FileMode::read_write);
    const Dataset dataset = Dataset::open(file, "/x");
    std::vector<float> row(columns);
    EXPECT_THROW(read_rows(dataset, 5, 1, row.data(), row.size()), H5Error);
    EXPECT_EQ(reset_unreadable_chunks(dataset), 2u);

    std::vector<float> back(rows * columns);
    read_rows(dataset, 0, rows, back.data(), back.size());
    const std::vector<float> values = numbered();
    for (int i = 0; i < rows * columns; ++i) {
        EXPECT_EQ(back[i], i < chunk_rows * columns ? values[i] : 0.0f) << "element " << i;
    }
    // A write of part of a replaced chunk reads it first, as HDF5 does with compressed chunks.
    write_rows(dataset, 9, 1, values.data() + 9 * columns, columns);
    read_rows(dataset, 9, 1, row.data(), row.size());
    EXPECT_EQ(row[0], values[9 * columns]);
    EXPECT_EQ(reset_unreadable_chunks(dataset), 0u);
}

TEST(ChunkRepair, SkipsTheChunksReadAlready) {
    const TempDir dir;
    const std::string path = compressed_file(dir);
    damage_chunk(path, 4);
    const File file = File::open(path, FileMode::read_write);
    const Dataset dataset = Dataset::open(file, "/x");
    EXPECT_EQ(reset_unreadable_chunks(dataset, ChunkIndices{{1, 0}}), 0u);  // said to be read: not checked
    EXPECT_EQ(reset_unreadable_chunks(dataset), 1u);
}

TEST(ChunkRepair, LeavesDatasetsWithoutFiltersAlone) {
    const TempDir dir;
    const std::string path = dir.file("plain.h5");
    const File file = File::create(path);
    DatasetCreation creation;
    creation.chunk = {chunk_rows, columns};
    const Dataset dataset = Dataset::create(file, "/x", Datatype::float32(), {rows, columns}, creation);
    EXPECT_EQ(reset_unreadable_chunks(dataset), 0u);
}

}  // namespace
}  // namespace attnbatch::io
