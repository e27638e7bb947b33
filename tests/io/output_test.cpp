// The output file: schema (read back by h5py), completion marker, .partial and rename,
// never overwriting without force, weights subsets, sizes.
#include "attnbatch/io/h5/h5.hpp"
#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/output/output_file.hpp"
#include "attnbatch/io/output/output_size.hpp"
#include "attnbatch/kernels/half.hpp"
#include "output/write_path_choice.hpp"
#include "support/child_process.hpp"
#include "support/direct_io.hpp"
#include "support/file_bytes.hpp"
#include "support/output_fixtures.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <utility>
#include <filesystem>

namespace attnbatch::io {
namespace {

using testing::provenance;
using testing::RunData;
using testing::small_layout;
using testing::write_all;

class Output : public ::testing::Test {
protected:
    testing::TempDir dir;
    const std::string path = dir.file("out.h5");
    const std::string partial = path + ".partial";
    static bool exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }
    static void expect_error(const std::function<void()>& action, int code, const std::vector<std::string>& fragments) {
        try {
            action();
            ADD_FAILURE() << "no Error";
        } catch (const Error& error) {
            EXPECT_EQ(error.exit_code(), code) << error.what();
            for (const auto& fragment : fragments) {
                EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
            }
        }
    }
};

TEST_F(Output, SchemaAsH5pySeesIt) {
    if (!testing::h5py_available()) GTEST_SKIP() << "no h5py for " ATTNBATCH_H5PY_PYTHON;
    const OutputLayout layout = small_layout();
    const RunData data(layout);
    {
        OutputFile out = OutputFile::create(path, layout, provenance());
        write_all(out, data, 3);
        out.finalize();
    }
    const testing::Outcome result = testing::python(R"(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], 'r') as f:
    def check(name, shape, dtype, labels):
        ds = f[name]
        assert ds.shape == shape, (name, ds.shape)
        assert ds.dtype == np.dtype(dtype), (name, ds.dtype)
        assert [d.label for d in ds.dims] == labels, (name, [d.label for d in ds.dims])
    check('output', (4, 3, 5), 'float32', ['N', 'L', 'D'])
    check('attention', (4, 2, 3, 3), 'float32', ['N', 'H', 'L_q', 'L_k'])
    check('lse', (4, 2, 3), 'float32', ['N', 'H', 'L'])
    check('lengths', (4,), 'int32', ['N'])
    assert np.array_equal(f['output'][()].ravel(), np.arange(60, dtype=np.float32) * 0.5)
    assert np.array_equal(f['lse'][()].ravel(), -np.arange(24, dtype=np.float32))
    assert list(f['lengths'][()]) == [0, 1, 2, 3]
    assert int(f['attention'].attrs['first_sequence']) == 0
    a = f.attrs
    assert int(a['complete']) == 1
    assert a['version'] == '0.1.0' and a['input_file'] == 'in.h5' and a['input_dataset'] == '/embeddings'
    assert int(a['heads']) == 2 and int(a['causal']) == 1 and float(a['scale']) == 0.5
    assert a['weights_dtype'] == 'f32' and a['save_weights'] == 'all'
    assert int(a['ranks']) == 3 and int(a['threads']) == 8 and a['io_mode'] == 'parallel'
    assert len(a['creation_time']) == 20 and a['creation_time'].endswith('Z')
    assert f['config'].asstr()[()] == '[run]\ninput = in.h5\nheads = 2\n'
print('ok')
)",
                                                    {path});
    EXPECT_EQ(result.status, 0) << result.out;
}

TEST_F(Output, HalfWeightsSubsetAndMeanAsH5pySeesThem) {
    if (!testing::h5py_available()) GTEST_SKIP() << "no h5py for " ATTNBATCH_H5PY_PYTHON;
    OutputLayout layout = small_layout();
    layout.save_weights = SaveWeights::mean;
    layout.weights_dtype = WeightsDtype::f16;
    layout.weights_first = 1;
    layout.weights_last = 3;
    layout.gzip_level = 5;
    const RunData data(layout);
    {
        OutputFile out = OutputFile::create(path, layout, provenance());
        write_all(out, data, 1);
        out.finalize();
    }
    const testing::Outcome result = testing::python(R"(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], 'r') as f:
    a = f['attention']
    assert a.shape == (2, 1, 3, 3) and a.dtype == np.float16, (a.shape, a.dtype)
    assert int(a.attrs['first_sequence']) == 1
    expected = (np.arange(9, 27) % 64 / 64.0).astype(np.float16).reshape(2, 1, 3, 3)
    assert np.array_equal(a[()], expected), a[()]
    assert a.compression == 'gzip' and a.shuffle
    assert f.attrs['weights_dtype'] == 'f16' and f.attrs['save_weights'] == 'mean'
    assert list(f.attrs['weights_sequences']) == [1, 3]
print('ok')
)",
                                                    {path});
    EXPECT_EQ(result.status, 0) << result.out;
}

// Four sequences for testing::page_chunked_layout(4), /output and /attention in whole page-sized
// chunks from page-aligned memory, as a run's step buffers hold them.
struct PageChunkedBlock {
    static constexpr std::size_t output_floats = 4 * 32 * 32, map_floats = 4 * 2 * 32 * 32;
    static constexpr std::size_t bytes = (output_floats + map_floats) * sizeof(float), chunk = 8192;
    static_assert(output_floats * sizeof(float) < attnbatch::io::WritePathChoice::kTryBytes, "/output fits in one try");
    testing::PageAlignedFloats output = testing::page_aligned_floats(output_floats);
    testing::PageAlignedFloats maps = testing::page_aligned_floats(map_floats);
    std::vector<float> lse = std::vector<float>(4 * 2 * 32, 1.0f);
    std::vector<std::int32_t> lengths = std::vector<std::int32_t>(4, 32);

    PageChunkedBlock() {
        for (std::size_t i = 0; i < output_floats; ++i) output[i] = static_cast<float>(i);
        for (std::size_t i = 0; i < map_floats; ++i) maps[i] = -static_cast<float>(i);
    }
    OutputBlock block() {
        OutputBlock b;
        b.output = output.get();
        b.lse = lse.data();
        b.lengths = lengths.data();
        b.attention_f32 = maps.get();
        return b;
    }
    void expect_read_back(const std::string& path) const {
        const File file = File::open(path, FileMode::read_only);
        EXPECT_EQ(read_all<float>(Dataset::open(file, "/output")), std::vector<float>(output.get(), output.get() + output_floats));
        EXPECT_EQ(read_all<float>(Dataset::open(file, "/attention")), std::vector<float>(maps.get(), maps.get() + map_floats));
    }
};

// One process, whole page-sized chunks from page-aligned memory: durable and uncompressed, they
// go to the disk around HDF5 (its chunk cache is off for this file), and the file reads back
// as written in every mode.
TEST_F(Output, DurableWholeChunksGoStraightToTheDiskWithoutMpi) {
    PageChunkedBlock data;
    const std::size_t output_floats = PageChunkedBlock::output_floats, bytes = PageChunkedBlock::bytes,
                      chunk = PageChunkedBlock::chunk;
    const bool direct_io = testing::takes_direct_io(dir.path());
    for (const auto& [fsync, gzip] : {std::pair{true, 0}, std::pair{false, 0}, std::pair{true, 1}}) {
        OutputLayout layout = testing::page_chunked_layout(4);
        layout.gzip_level = gzip;
        OutputOptions options;
        options.force = true;
        options.fsync = fsync;
        OutputFile out = OutputFile::create(path, layout, provenance(), options);
        out.write_block(0, 4, data.block());
        // Durable: both datasets past the page cache. Scratch: the first write of whole chunks
        // tries the page cache with up to kTryBytes of it and sends the rest past it; later
        // writes go the way that cost less (write_path_choice.hpp), which the test cannot know.
        if (!direct_io || gzip != 0) {
            EXPECT_EQ(out.direct_bytes(), 0u) << "fsync " << fsync << ", gzip " << gzip;
        } else if (fsync) {
            EXPECT_EQ(out.direct_bytes(), bytes);
        } else {
            EXPECT_LE(out.direct_bytes(), bytes - output_floats * sizeof(float))
                << "all of /output (" << output_floats * sizeof(float) / chunk << " chunks, under kTryBytes) tried through the page cache";
            EXPECT_GE(out.direct_bytes(), bytes - output_floats * sizeof(float) - chunk) << "/attention past it but for a try";
        }
        out.finalize();
        data.expect_read_back(path);
    }
}

// A new output's chunks are placed at creation but not written (no fill value): without
// reserve_blocks the file is sparse there, and the ranks' first writes would allocate its blocks
// under the inode's lock (reserved_blocks.hpp). Its size and contents stay as HDF5 left them.
TEST_F(Output, CreationGivesTheFileItsBlocksBeforeAnyWrite) {
    const std::string probe = dir.file("probe");
    const int probe_fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(probe_fd, 0);
    const bool allocates = ::fallocate(probe_fd, 0, 0, 1 << 20) == 0;
    ::close(probe_fd);
    if (!allocates) GTEST_SKIP() << dir.path() << " has no fallocate(2)";
    PageChunkedBlock data;
    OutputOptions options;
    options.force = true;
    OutputFile out = OutputFile::create(path, testing::page_chunked_layout(4), provenance(), options);
    struct stat status {};
    ASSERT_EQ(::stat(partial.c_str(), &status), 0);
    ASSERT_GE(static_cast<std::size_t>(status.st_size), PageChunkedBlock::bytes) << "every chunk placed in the file";
    EXPECT_GE(static_cast<std::uint64_t>(status.st_blocks) * 512, static_cast<std::uint64_t>(status.st_size))
        << "blocks under all of its " << status.st_size << " bytes";
    out.write_block(0, 4, data.block());
    out.finalize();
    struct stat published {};
    ASSERT_EQ(::stat(path.c_str(), &published), 0);
    EXPECT_EQ(published.st_size, status.st_size) << "the size HDF5 gave it";
    data.expect_read_back(path);
}

// Scratch mode while the rank computes (OutputFile::watch_compute): every whole chunk goes past
// the page cache, the first one too, which a write with the compute done tries through the page
// cache (write_path_choice.hpp).
TEST_F(Output, ScratchWholeChunksGoPastThePageCacheWhileTheComputeRuns) {
    if (!testing::takes_direct_io(dir.path())) GTEST_SKIP() << dir.path() << " refuses O_DIRECT";
    PageChunkedBlock data;
    const std::size_t bytes = PageChunkedBlock::bytes, chunk = PageChunkedBlock::chunk;
    for (const bool computing : {true, false}) {
        OutputOptions options;
        options.force = true;
        options.fsync = false;
        OutputFile out = OutputFile::create(path, testing::page_chunked_layout(4), provenance(), options);
        std::atomic<bool> flag{computing};
        out.watch_compute(&flag);
        out.write_block(0, 4, data.block());
        if (computing) {
            EXPECT_EQ(out.direct_bytes(), bytes) << "all of /output and /attention past the page cache";
        } else {
            EXPECT_LE(out.direct_bytes(), bytes - chunk) << "the compute done: the first chunk tried through the page cache";
        }
        out.watch_compute(nullptr);
        out.finalize();
        data.expect_read_back(path);
    }
}

// Blocks whose bounds are not chunk bounds (a step of 125 sequences against chunks of 16, say):
// the whole chunks inside each still go to the disk around HDF5, and only the parts of a chunk at
// either end through it. Here /output holds two sequences a chunk and /attention one.
TEST_F(Output, DurableBlocksOffChunkBoundsSendTheirWholeChunksToTheDisk) {
    constexpr std::size_t kOutputRow = 32 * 32, kMapRow = 2 * 32 * 32;
    const std::int64_t bounds[] = {0, 3, 8};  // /output chunks [0, 2) [2, 4) ...: both blocks cut one
    std::vector<float> all_output, all_maps;
    const bool direct_io = testing::takes_direct_io(dir.path());
    {
        OutputLayout layout = testing::page_chunked_layout(8);
        OutputOptions options;
        options.fsync = true;
        OutputFile out = OutputFile::create(path, layout, provenance(), options);
        for (int b = 0; b < 2; ++b) {
            const auto first = bounds[b], count = bounds[b + 1] - bounds[b];
            const auto rows = static_cast<std::size_t>(count);
            // Each block's memory starts on a page bound, as a run's step buffers do.
            const testing::PageAlignedFloats output = testing::page_aligned_floats(rows * kOutputRow);
            const testing::PageAlignedFloats maps = testing::page_aligned_floats(rows * kMapRow);
            for (std::size_t i = 0; i < rows * kOutputRow; ++i) output[i] = static_cast<float>(first * 10000) + static_cast<float>(i);
            for (std::size_t i = 0; i < rows * kMapRow; ++i) maps[i] = -static_cast<float>(first * 100000) - static_cast<float>(i);
            all_output.insert(all_output.end(), output.get(), output.get() + rows * kOutputRow);
            all_maps.insert(all_maps.end(), maps.get(), maps.get() + rows * kMapRow);
            std::vector<float> lse(rows * 2 * 32, 1.0f);
            std::vector<std::int32_t> lengths(rows, 32);
            OutputBlock block;
            block.output = output.get();
            block.lse = lse.data();
            block.lengths = lengths.data();
            block.attention_f32 = maps.get();
            out.write_block(first, bounds[b + 1], block);
        }
        // /output: sequences 0-1 and 4-7 (whole chunks), not 2 and 3 (halves of one in each
        // block); /attention: all eight.
        const std::size_t expected = (6 * kOutputRow + 8 * kMapRow) * sizeof(float);
        EXPECT_EQ(out.direct_bytes(), direct_io ? expected : 0u);
        out.finalize();
    }
    const File file = File::open(path, FileMode::read_only);
    EXPECT_EQ(read_all<float>(Dataset::open(file, "/output")), all_output);
    EXPECT_EQ(read_all<float>(Dataset::open(file, "/attention")), all_maps);
}

// The packed layout keeps a sequence's map rows only up to its length in memory; the file holds
// every map L rows long. Uncompressed, the maps have no fill: the writer pads each map with zero
// rows itself, whole chunks (here one map each) past the page cache, the rest through HDF5.
TEST_F(Output, PackedMapsArePaddedWithZerosAndTheirWholeChunksGoToTheDisk) {
    const std::vector<std::int64_t> lengths = {32, 5, 17, 0, 32, 9, 1, 20};
    auto offsets = std::make_shared<std::vector<std::int64_t>>(1, 0);
    for (const std::int64_t n : lengths) offsets->push_back(offsets->back() + n);
    OutputLayout layout = testing::page_chunked_layout(8);  // one 8 KiB map per chunk
    layout.packed = true;
    layout.offsets = offsets;
    const std::size_t len = 32, heads = 2, d_out = 32;
    const bool direct_io = testing::takes_direct_io(dir.path());
    std::vector<float> expected_maps(8 * heads * len * len, 0.0f), expected_output;
    {
        OutputOptions options;
        options.fsync = true;
        OutputFile out = OutputFile::create(path, layout, provenance(), options);
        const std::int64_t bounds[] = {0, 3, 8};
        for (int b = 0; b < 2; ++b) {
            const std::int64_t first = bounds[b], last = bounds[b + 1];
            const auto rows = static_cast<std::size_t>((*offsets)[static_cast<std::size_t>(last)] - (*offsets)[static_cast<std::size_t>(first)]);
            std::vector<float> output(rows * d_out), lse(rows * heads, 0.5f), maps(rows * heads * len);
            for (std::size_t i = 0; i < output.size(); ++i) output[i] = static_cast<float>(first * 100000) + static_cast<float>(i);
            // Block memory: per sequence [heads][its rows][L]; the file: [heads][L][L].
            std::size_t at = 0;
            for (std::int64_t q = first; q < last; ++q) {
                const auto n = static_cast<std::size_t>(lengths[static_cast<std::size_t>(q)]);
                for (std::size_t h = 0; h < heads; ++h) {
                    for (std::size_t r = 0; r < n; ++r) {
                        for (std::size_t c = 0; c < len; ++c, ++at) {
                            maps[at] = 1.0f + static_cast<float>(at) + static_cast<float>(q * 1000000);
                            expected_maps[((static_cast<std::size_t>(q) * heads + h) * len + r) * len + c] = maps[at];
                        }
                    }
                }
            }
            expected_output.insert(expected_output.end(), output.begin(), output.end());
            std::vector<std::int32_t> block_lengths(lengths.begin() + first, lengths.begin() + last);
            OutputBlock block;
            block.output = output.data();
            block.lse = lse.data();
            block.lengths = block_lengths.data();
            block.attention_f32 = maps.data();
            out.write_span(OutputSpan{first, last, 0, 0}, block);
        }
        // Every map is a whole chunk of one span: all eight past the page cache.
        EXPECT_GE(out.direct_bytes(), direct_io ? 8 * heads * len * len * sizeof(float) : 0u);
        out.finalize();
    }
    const File file = File::open(path, FileMode::read_only);
    EXPECT_EQ(read_all<float>(Dataset::open(file, "/attention")), expected_maps);
    EXPECT_EQ(read_all<float>(Dataset::open(file, "/output")), expected_output);
}

TEST_F(Output, CompleteIsZeroUntilFinalizeThenTheFileIsRenamed) {
    const OutputLayout layout = small_layout();
    const RunData data(layout);
    OutputFile out = OutputFile::create(path, layout, provenance());
    EXPECT_TRUE(exists(partial));
    EXPECT_FALSE(exists(path));
    EXPECT_EQ(get_int_attribute(out.file(), "complete"), 0);
    write_all(out, data, 2);
    out.finalize();
    EXPECT_FALSE(exists(partial));
    ASSERT_TRUE(exists(path));
    const File file = File::open(path, FileMode::read_only);
    EXPECT_EQ(get_int_attribute(file, "complete"), 1);
    EXPECT_EQ(read_all<float>(Dataset::open(file, "/output")), data.output);
    EXPECT_EQ(read_all<float>(Dataset::open(file, "/attention")), data.attention);
    EXPECT_EQ(read_all<std::int32_t>(Dataset::open(file, "/lengths")), data.lengths);
}

TEST_F(Output, AnInterruptedRunLeavesAPartialWithCompleteZeroAndMarkers) {
    if (!testing::h5py_available()) GTEST_SKIP() << "no h5py for " ATTNBATCH_H5PY_PYTHON;
    const OutputLayout layout = small_layout();
    const RunData data(layout);
    {
        OutputFile out = OutputFile::create(path, layout, provenance());
        out.write_block(0, 2, data.block(layout, 0));
        out.flush();
    }  // destroyed without finalize, as by an exception
    EXPECT_FALSE(exists(path));
    const testing::Outcome result = testing::python(R"(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], 'r') as f:
    assert int(f.attrs['complete']) == 0
    assert list(f['lengths'][()]) == [0, 1, -1, -1], f['lengths'][()]
    lse = f['lse'][()]
    assert not np.isnan(lse[:2]).any() and np.isnan(lse[2:]).all()
print('ok')
)",
                                                    {partial});
    EXPECT_EQ(result.status, 0) << result.out;
}

TEST_F(Output, ExistingOutputIsNeverOverwrittenWithoutForce) {
    testing::write_text(path, "previous result");
    expect_error([&] { OutputFile::create(path, small_layout(), provenance()); }, exit_usage,
                 {path, "exists", "--force"});
    EXPECT_EQ(testing::read_text(path), "previous result");
    EXPECT_FALSE(exists(partial));
}

TEST_F(Output, ForceReplacesOnlyAtTheFinalRename) {
    testing::write_text(path, "previous result");
    const OutputLayout layout = small_layout();
    const RunData data(layout);
    OutputOptions options;
    options.force = true;
    {
        OutputFile failed = OutputFile::create(path, layout, provenance(), options);
        failed.write_block(0, 1, data.block(layout, 0));
    }  // a run that died: the old result must survive it
    EXPECT_EQ(testing::read_text(path), "previous result");
    EXPECT_TRUE(exists(partial));

    OutputFile out = OutputFile::create(path, layout, provenance(), options);  // force: the stale .partial goes
    write_all(out, data, 4);
    EXPECT_EQ(testing::read_text(path), "previous result");
    out.finalize();
    EXPECT_TRUE(is_hdf5_file(path));
    EXPECT_FALSE(exists(partial));
}

TEST_F(Output, StalePartialNeedsResumeOrForce) {
    testing::write_text(partial, "half a run");
    expect_error([&] { OutputFile::create(path, small_layout(), provenance()); }, exit_usage,
                 {partial, "--resume", "--force"});
    EXPECT_EQ(testing::read_text(partial), "half a run");
}

TEST_F(Output, OutputAppearingDuringTheRunIsNotReplaced) {
    const OutputLayout layout = small_layout();
    const RunData data(layout);
    OutputFile out = OutputFile::create(path, layout, provenance());
    write_all(out, data, 4);
    testing::write_text(path, "someone else's file");
    expect_error([&] { out.finalize(); }, exit_usage, {path, partial});
    EXPECT_EQ(testing::read_text(path), "someone else's file");
    EXPECT_TRUE(exists(partial));
}

TEST_F(Output, PreparingPathsIsAStepOfItsOwn) {
    // Under MPI one rank prepares, then every rank creates with paths_prepared.
    testing::write_text(partial, "stale");
    EXPECT_THROW(prepare_output_path(path, false), Error);
    prepare_output_path(path, true);
    EXPECT_FALSE(exists(partial));
    OutputOptions options;
    options.paths_prepared = true;
    OutputFile out = OutputFile::create(path, small_layout(), provenance(), options);
    EXPECT_TRUE(exists(partial));
}

TEST_F(Output, MissingDirectoryIsAnIoError) {
    expect_error([&] { OutputFile::create(dir.file("no/such/dir/out.h5"), small_layout(), provenance()); }, exit_io,
                 {"no/such/dir", "does not exist"});
}

TEST_F(Output, UnusableLayoutsAreUsageErrors) {
    OutputLayout layout = small_layout();
    layout.weights_first = 2;
    layout.weights_last = 2;
    expect_error([&] { OutputFile::create(path, layout, provenance()); }, exit_usage, {"--weights-seqs 2:2"});
    layout = small_layout();
    layout.gzip_level = 12;
    expect_error([&] { OutputFile::create(path, layout, provenance()); }, exit_usage, {"gzip level 12"});
    EXPECT_FALSE(exists(partial));
}

TEST_F(Output, NoWeightsMeansNoAttentionDataset) {
    OutputLayout layout = small_layout();
    layout.save_weights = SaveWeights::none;
    const RunData data(layout);
    OutputFile out = OutputFile::create(path, layout, provenance());
    OutputBlock block = data.block(layout, 0);
    block.attention_f32 = nullptr;
    out.write_block(0, 4, block);
    out.finalize();
    const File file = File::open(path, FileMode::read_only);
    EXPECT_EQ(object_kind(file, "/attention"), ObjectKind::missing);
}

TEST_F(Output, WriteBlockChecksItsArguments) {
    const OutputLayout layout = small_layout();
    const RunData data(layout);
    OutputFile out = OutputFile::create(path, layout, provenance());
    EXPECT_THROW(out.write_block(3, 5, data.block(layout, 0)), std::invalid_argument);
    OutputBlock missing = data.block(layout, 0);
    missing.lse = nullptr;
    EXPECT_THROW(out.write_block(0, 1, missing), std::invalid_argument);
    EXPECT_NO_THROW(out.write_block(2, 2, OutputBlock{}));  // an empty share, as collective I/O needs
}

TEST_F(Output, ChunksHoldWholeSequences) {
    OutputLayout layout = small_layout();
    layout.n = 1000;
    layout.len = 128;
    layout.d_out = 64;
    layout.save_weights = SaveWeights::none;
    OutputFile out = OutputFile::create(path, layout, provenance());
    EXPECT_EQ(out.sequences_per_chunk(), 32);
    EXPECT_EQ(Dataset::open(out.file(), "/output").chunk(), (Dims{32, 128, 64}));
}

// A compressed chunk is written whole, to new space, by every step that writes part of it:
// chunk_sequences keeps each dataset's chunks along the batch within a step's sequences (or
// their share of the packed rows), and the schedule's grid (sequence_chunks) is the file's.
TEST_F(Output, CompressedChunksHoldAtMostChunkSequences) {
    OutputLayout layout = small_layout();
    layout.n = 1000;
    layout.len = 16;
    layout.d_out = 16;
    layout.gzip_level = 1;
    layout.chunk_sequences = 6;
    {
        OutputFile out = OutputFile::create(path, layout, provenance());
        EXPECT_EQ(out.sequences_per_chunk(), 6);
        EXPECT_EQ(Dataset::open(out.file(), "/output").chunk(), (Dims{6, 16, 16}));  // 1024 sequences uncapped
        EXPECT_EQ(Dataset::open(out.file(), "/attention").chunk(), (Dims{6, 2, 16, 16}));
        EXPECT_EQ(Dataset::open(out.file(), "/lse").chunk(), (Dims{6, 2, 16}));
        EXPECT_EQ(Dataset::open(out.file(), "/lengths").chunk(), (Dims{6}));
        EXPECT_EQ(sequence_chunks(layout).every, 6);
    }
    ::unlink(partial.c_str());
    // Packed: 1000 sequences of 1 to 16 rows; 6 sequences' share of T, rounded up.
    auto offsets = std::make_shared<std::vector<std::int64_t>>(1, 0);
    for (std::int64_t s = 0; s < layout.n; ++s) offsets->push_back(offsets->back() + 1 + s % 16);
    layout.packed = true;
    layout.offsets = offsets;
    const auto tokens = static_cast<std::uint64_t>(offsets->back());
    const std::uint64_t rows = (tokens * 6 + 999) / 1000;
    OutputFile out = OutputFile::create(path, layout, provenance());
    EXPECT_EQ(Dataset::open(out.file(), "/output").chunk(), (Dims{rows, 16}));
    EXPECT_EQ(Dataset::open(out.file(), "/lse").chunk(), (Dims{2, rows}));
    EXPECT_EQ(Dataset::open(out.file(), "/lengths").chunk(), (Dims{6}));
    EXPECT_EQ(Dataset::open(out.file(), "/offsets").chunk(), (Dims{1001}));  // written once, at creation
}

TEST(OutputSize, EstimatesAndFreeSpace) {
    OutputLayout layout;
    layout.n = 10;
    layout.len = 100;
    layout.heads = 8;
    layout.d_out = 64;
    OutputSizes sizes = estimate_output_bytes(layout);
    EXPECT_EQ(sizes.output, 10u * 100 * 64 * 4);
    EXPECT_EQ(sizes.attention, 10u * 8 * 100 * 100 * 4);
    EXPECT_EQ(sizes.lse, 10u * 8 * 100 * 4);
    EXPECT_EQ(sizes.lengths, 40u);
    EXPECT_EQ(sizes.total(), sizes.output + sizes.attention + sizes.lse + sizes.lengths);
    layout.save_weights = SaveWeights::mean;
    layout.weights_dtype = WeightsDtype::f16;
    layout.weights_first = 5;
    EXPECT_EQ(estimate_output_bytes(layout).attention, 5u * 1 * 100 * 100 * 2);
    layout.save_weights = SaveWeights::none;
    EXPECT_EQ(estimate_output_bytes(layout).attention, 0u);

    const testing::TempDir dir;
    EXPECT_GT(free_bytes_at(dir.file("not-yet.h5")), 0u);
    EXPECT_GT(free_bytes_at(dir.path()), 0u);
    EXPECT_THROW(free_bytes_at("/no/such/dir/out.h5"), Error);
}

TEST(OutputLayoutFor, TakesShapesFromTheInput) {
    InputSpec spec;
    spec.n = 7;
    spec.len = 9;
    spec.heads = 3;
    spec.d_v = 4;
    const OutputLayout layout = output_layout_for(spec);
    EXPECT_EQ(layout.n, 7);
    EXPECT_EQ(layout.len, 9);
    EXPECT_EQ(layout.heads, 3);
    EXPECT_EQ(layout.d_out, 12);
    EXPECT_EQ(layout.weights_range(2, 5), (std::pair<std::int64_t, std::int64_t>{2, 5}));
}

}  // namespace
}  // namespace attnbatch::io
