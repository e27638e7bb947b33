// The FileAccess seam under MPI-IO: every rank creates the output collectively, writes its
// own sequences with collective transfers (extra ranks with empty shares), and rank 0
// publishes. Run under mpiexec with 2 or more ranks (see CMakeLists.txt).
#include "attnbatch/io/h5/h5.hpp"
#include "attnbatch/io/h5/mpi_io.hpp"
#include "attnbatch/io/output/output_file.hpp"
#include "support/direct_io.hpp"
#include "support/output_fixtures.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <mpi.h>


#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace attnbatch::io {
namespace {

int rank() {
    int value = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &value);
    return value;
}

int ranks() {
    int value = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &value);
    return value;
}

// One scratch directory for all ranks: rank 0 makes it, everyone learns its name.
std::string shared_directory(std::unique_ptr<testing::TempDir>& owner) {
    char path[4096] = {};
    if (rank() == 0) {
        owner = std::make_unique<testing::TempDir>();
        owner->path().copy(path, sizeof path - 1);
    }
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    return path;
}

void collective_run(int gzip_level) {
    std::unique_ptr<testing::TempDir> owner;
    const std::string path = shared_directory(owner) + "/out.h5";
    OutputLayout layout;
    layout.n = 10;
    layout.len = 4;
    layout.heads = 2;
    layout.d_out = 3;
    layout.gzip_level = gzip_level;
    layout.weights_first = 2;
    layout.weights_last = 9;
    layout.chunk_bytes = 48;  // one sequence of /output per chunk: no chunk is shared by two ranks
    Provenance provenance;
    provenance.creation_time = "2024-01-01T00:00:00Z";  // identical on every rank
    provenance.ranks = ranks();
    provenance.config = "io = parallel\n";

    int prepared = 1;
    if (rank() == 0) {
        try {
            prepare_output_path(path, false);
        } catch (const Error&) {
            prepared = 0;
        }
    }
    MPI_Bcast(&prepared, 1, MPI_INT, 0, MPI_COMM_WORLD);
    ASSERT_EQ(prepared, 1);

    OutputOptions options;
    options.paths_prepared = true;
    options.access = mpi_io_access(MPI_COMM_WORLD);
    OutputFile out = OutputFile::create(path, layout, provenance, options);
    ASSERT_TRUE(out.file().uses_mpi_io());

    // Ranks 0 and 1 split the sequences; any further rank writes empty ranges, in the same
    // number of calls (two blocks each).
    const std::int64_t first = rank() == 0 ? 0 : (rank() == 1 ? 5 : 10);
    const std::int64_t last = rank() <= 1 ? first + 5 : 10;
    const auto value = static_cast<float>(rank() + 1);
    std::vector<float> output(5 * 4 * 3, value), lse(5 * 2 * 4, value), attention(5 * 2 * 16, value);
    std::vector<std::int32_t> lengths(5, rank() + 1);
    std::int64_t at = first;
    for (const std::int64_t count : {3, 2}) {
        const std::int64_t end = std::min(at + count, last);
        const std::size_t offset = static_cast<std::size_t>(at - first);
        OutputBlock block;
        block.output = output.data() + offset * 12;
        block.lse = lse.data() + offset * 8;
        block.lengths = lengths.data() + offset;
        block.attention_f32 = attention.data();  // same value everywhere: any offset would do
        out.write_block(at, end, block, Transfer::collective);
        EXPECT_EQ(collective_fallback_cause(), "") << "the write fell back to independent I/O";
        at = end;
    }
    out.close_complete();
    if (rank() == 0) publish_output(path, false);
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank() == 0) {
        const File file = File::open(path, FileMode::read_only);
        EXPECT_EQ(get_int_attribute(file, "complete"), 1);
        EXPECT_EQ(get_int_attribute(file, "ranks"), ranks());
        EXPECT_EQ(read_all<std::int32_t>(Dataset::open(file, "/lengths")),
                  (std::vector<std::int32_t>{1, 1, 1, 1, 1, 2, 2, 2, 2, 2}));
        const std::vector<float> weights = read_all<float>(Dataset::open(file, "/attention"));
        ASSERT_EQ(weights.size(), 7u * 32u);
        EXPECT_EQ(weights.front(), 1.0f);  // sequence 2, from rank 0
        EXPECT_EQ(weights.back(), 2.0f);   // sequence 8, from rank 1
        EXPECT_EQ(read_text_dataset(file, "/config"), "io = parallel\n");
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(MpiOutput, CollectiveWritesWithoutCompression) { collective_run(0); }
TEST(MpiOutput, CollectiveWritesWithGzip) { collective_run(4); }

// Independent writes of whole chunks, in the durable mode and without it: with fsync on, /output
// and /attention go to the disk around HDF5 (OutputFile::direct_bytes); with it off the first
// write tries the page cache with a chunk (here /output's only one) and /attention then goes
// past it, the usual way while the disk's cost is unknown; the file reads back the same either
// way. Ranks 0-2 write two sequences each (one /output chunk, two /attention
// chunks, all page-sized), from page-aligned buffers.
void independent_run(bool fsync) {
    std::unique_ptr<testing::TempDir> owner;
    const std::string directory = shared_directory(owner);
    const std::string path = directory + "/out.h5";
    const OutputLayout layout = testing::page_chunked_layout(6);
    Provenance provenance;
    provenance.creation_time = "2024-01-01T00:00:00Z";
    provenance.ranks = ranks();
    if (rank() == 0) prepare_output_path(path, false);
    MPI_Barrier(MPI_COMM_WORLD);
    OutputOptions options;
    options.paths_prepared = true;
    options.access = mpi_io_access(MPI_COMM_WORLD);
    options.fsync = fsync;
    OutputFile out = OutputFile::create(path, layout, provenance, options);

    const std::int64_t first = std::min<std::int64_t>(2 * rank(), 6), last = std::min<std::int64_t>(first + 2, 6);
    const std::size_t output_floats = 2 * 32 * 32, map_floats = 2 * 2 * 32 * 32;
    const testing::PageAlignedFloats output = testing::page_aligned_floats(output_floats);
    const testing::PageAlignedFloats maps = testing::page_aligned_floats(map_floats);
    for (std::size_t i = 0; i < output_floats; ++i) output[i] = static_cast<float>(first * 100000 + static_cast<std::int64_t>(i));
    for (std::size_t i = 0; i < map_floats; ++i) maps[i] = -static_cast<float>(first * 100000 + static_cast<std::int64_t>(i));
    std::vector<float> lse(2 * 2 * 32, 1.0f);
    std::vector<std::int32_t> lengths(2, 32);
    OutputBlock block;
    block.output = output.get();
    block.lse = lse.data();
    block.lengths = lengths.data();
    block.attention_f32 = maps.get();
    out.write_block(first, last, block, Transfer::independent);
    const bool direct = last > first && testing::takes_direct_io(directory);
    const std::uint64_t expected = direct ? (fsync ? output_floats + map_floats : map_floats) * sizeof(float) : 0;
    EXPECT_EQ(out.direct_bytes(), expected) << "rank " << rank() << ", fsync " << fsync;
    out.close_complete();
    EXPECT_EQ(out.direct_bytes(), expected) << "counted after closing too";
    if (rank() == 0) publish_output(path, false, fsync);
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank() == 0) {
        const File file = File::open(path, FileMode::read_only);
        const std::vector<float> all_output = read_all<float>(Dataset::open(file, "/output"));
        const std::vector<float> all_maps = read_all<float>(Dataset::open(file, "/attention"));
        // Counted, not asserted one by one: rank 0 must reach the barrier below whatever it finds.
        std::size_t wrong_output = all_output.size() == 3 * output_floats ? 0 : 1;
        std::size_t wrong_maps = all_maps.size() == 3 * map_floats ? 0 : 1;
        for (std::int64_t writer = 0; writer < 3 && wrong_output + wrong_maps == 0; ++writer) {
            for (std::size_t i = 0; i < output_floats; ++i) {
                wrong_output += all_output[static_cast<std::size_t>(writer) * output_floats + i] !=
                                static_cast<float>(2 * writer * 100000 + static_cast<std::int64_t>(i));
            }
            for (std::size_t i = 0; i < map_floats; ++i) {
                wrong_maps += all_maps[static_cast<std::size_t>(writer) * map_floats + i] !=
                              -static_cast<float>(2 * writer * 100000 + static_cast<std::int64_t>(i));
            }
        }
        EXPECT_EQ(wrong_output, 0u) << "elements of /output not as written (or its size)";
        EXPECT_EQ(wrong_maps, 0u) << "elements of /attention not as written (or its size)";
        EXPECT_EQ(read_all<std::int32_t>(Dataset::open(file, "/lengths")), (std::vector<std::int32_t>(6, 32)));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(MpiOutput, DurableWholeChunksGoStraightToTheDisk) { independent_run(true); }
TEST(MpiOutput, ScratchWritesTryBothWays) { independent_run(false); }

}  // namespace
}  // namespace attnbatch::io

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    ::testing::InitGoogleTest(&argc, argv);
    if (attnbatch::io::rank() != 0) {
        // One report is enough; failures still show in the exit code of every rank.
        delete ::testing::UnitTest::GetInstance()->listeners().Release(
            ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
    }
    const int failed = RUN_ALL_TESTS();
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any_failed;
}
