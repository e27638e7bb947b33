// Whole chunks written around HDF5 with O_DIRECT (src/io/output/direct_chunks.hpp): what it
// writes reads back through HDF5 at the right elements, and it declines (writing nothing)
// whatever is not whole chunks on page bounds, in memory and in the file.
#include "output/direct_chunks.hpp"
#include "support/direct_io.hpp"
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"

#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

namespace attnbatch::io {
namespace {

using testing::page_aligned_floats;
using testing::takes_direct_io;
using testing::TempDir;

// [8, 2, 32, 32] floats in chunks of one leading index: 8 KiB, two pages each.
const Dims kDims{8, 2, 32, 32};
constexpr std::uint64_t kChunk = 2 * 32 * 32;
constexpr std::uint64_t kElements = 8 * kChunk;

Dataset make(const File& file, const std::string& path, Dims chunk, int gzip = 0) {
    DatasetCreation creation;
    creation.chunk = std::move(chunk);
    creation.gzip_level = gzip;
    creation.allocate_early = gzip == 0;
    creation.fill_never = gzip == 0;
    return Dataset::create(file, path, Datatype::float32(), kDims, creation);
}

// A file aligned to pages whose /d has its chunks placed in it (flushed) before anything writes
// them, and the writer of /d's whole chunks around HDF5. Closed at the end of its scope.
struct PlacedFile {
    File file;
    Dataset dataset;
    DirectChunks chunks;
    explicit PlacedFile(const std::string& path)
        : file(File::create(path, {}, FileTuning{4096, false})),
          dataset(make(file, "/d", {1, 2, 32, 32})),
          chunks((file.flush(), path), dataset) {}
};

// n page-aligned floats first, first + 1, ...: each element tells where it belongs.
testing::PageAlignedFloats counting(std::uint64_t n, float first) {
    testing::PageAlignedFloats values = page_aligned_floats(n);
    std::iota(values.get(), values.get() + n, first);
    return values;
}

// Read back through HDF5, /d of `path` holds `values` (kElements of them).
void expect_holds(const std::string& path, const float* values) {
    const std::vector<float> back = read_all<float>(Dataset::open(File::open(path, FileMode::read_only), "/d"));
    ASSERT_EQ(back.size(), kElements);
    for (std::uint64_t i = 0; i < kElements; ++i) ASSERT_EQ(back[i], values[i]) << "element " << i;
}

TEST(DirectChunks, WholeChunksReadBackThroughHdf5) {
    TempDir dir;
    const std::string path = dir.file("direct.h5");
    const testing::PageAlignedFloats values = counting(kElements, 1.0f);
    const bool direct = takes_direct_io(dir.path());
    {
        PlacedFile placed(path);
        EXPECT_EQ(placed.chunks.usable(), direct);
        // Chunks 2-4 around HDF5, the others through it.
        EXPECT_EQ(placed.chunks.write(2 * kChunk, 3 * kChunk, values.get() + 2 * kChunk), direct);
        EXPECT_EQ(placed.chunks.written(), direct ? 3 * kChunk * sizeof(float) : 0u);
        if (direct) {
            write_rows(placed.dataset, 0, 2, values.get(), 2 * kChunk);
            write_rows(placed.dataset, 5, 3, values.get() + 5 * kChunk, 3 * kChunk);
        } else {
            write_rows(placed.dataset, 0, 8, values.get(), kElements);
        }
        placed.dataset.close();
    }
    expect_holds(path, values.get());
}

TEST(DirectChunks, ThroughThePageCacheTheSameBytesLandAndAreNotCountedAsDirect) {
    TempDir dir;
    if (!takes_direct_io(dir.path())) {
        SUCCEED() << dir.path() << " refuses O_DIRECT: every write declined (WholeChunksReadBackThroughHdf5)";
        return;
    }
    const std::string path = dir.file("mixed.h5");
    const testing::PageAlignedFloats values = counting(kElements, -100.0f);
    {
        PlacedFile placed(path);
        DirectChunks& chunks = placed.chunks;
        // Alternating ways, chunk by chunk, then the last three in one write through the cache.
        for (std::uint64_t chunk = 0; chunk < 5; ++chunk) {
            const WritePath way = chunk % 2 == 0 ? WritePath::page_cache : WritePath::direct;
            ASSERT_TRUE(chunks.write(chunk * kChunk, kChunk, values.get() + chunk * kChunk, way)) << "chunk " << chunk;
        }
        ASSERT_TRUE(chunks.write(5 * kChunk, 3 * kChunk, values.get() + 5 * kChunk, WritePath::page_cache));
        EXPECT_EQ(chunks.written(), 2 * kChunk * sizeof(float)) << "only chunks 1 and 3 went past the page cache";
        EXPECT_FALSE(chunks.write(kChunk / 2, kChunk, values.get(), WritePath::page_cache)) << "declined either way";
        placed.dataset.close();
    }
    expect_holds(path, values.get());
}

// One plan written in two parts, as a scratch run's try of the other way does: the first chunk
// through the page cache, the rest past it.
TEST(DirectChunks, APlanWrittenInPartsTwoWays) {
    TempDir dir;
    if (!takes_direct_io(dir.path())) {
        SUCCEED() << dir.path() << " refuses O_DIRECT: nothing is planned (WholeChunksReadBackThroughHdf5)";
        return;
    }
    const std::string path = dir.file("parts.h5");
    const testing::PageAlignedFloats values = counting(kElements, 7.0f);
    {
        PlacedFile placed(path);
        DirectChunks& chunks = placed.chunks;
        EXPECT_TRUE(chunks.plan(kChunk / 2, kChunk, values.get()).empty()) << "starts inside a chunk";
        const std::vector<DirectChunks::Run> runs = chunks.plan(0, kElements, values.get());
        ASSERT_FALSE(runs.empty());
        const std::size_t bytes = kElements * sizeof(float);
        ASSERT_EQ(chunks.chunk_bytes(), kChunk * sizeof(float));
        chunks.write(runs, 0, chunks.chunk_bytes(), WritePath::page_cache);
        chunks.write(runs, chunks.chunk_bytes(), bytes, WritePath::direct);
        EXPECT_EQ(chunks.written(), bytes - chunks.chunk_bytes()) << "all but the first chunk past the page cache";
        placed.dataset.close();
    }
    expect_holds(path, values.get());
}

// A block's bounds need not be chunk bounds: whole_chunks() names the whole chunks inside it,
// which plan() then takes.
TEST(DirectChunks, TheWholeChunksInsideABlockOffChunkBounds) {
    TempDir dir;
    if (!takes_direct_io(dir.path())) {
        SUCCEED() << dir.path() << " refuses O_DIRECT: no chunk is whole to it";
        return;
    }
    PlacedFile placed(dir.file("inside.h5"));
    const DirectChunks& chunks = placed.chunks;
    using Range = std::pair<std::uint64_t, std::uint64_t>;
    EXPECT_EQ(chunks.whole_chunks(kChunk / 2, 3 * kChunk), (Range{kChunk, 3 * kChunk})) << "half a chunk at either end";
    EXPECT_EQ(chunks.whole_chunks(2 * kChunk, 2 * kChunk), (Range{2 * kChunk, 4 * kChunk})) << "on chunk bounds";
    EXPECT_EQ(chunks.whole_chunks(kChunk + 1, kChunk).first, chunks.whole_chunks(kChunk + 1, kChunk).second) << "none whole";
    EXPECT_EQ(chunks.whole_chunks(0, 0).first, chunks.whole_chunks(0, 0).second) << "nothing";
    const testing::PageAlignedFloats values = counting(kElements, 1.0f);
    const auto [begin, end] = chunks.whole_chunks(kChunk / 2, 3 * kChunk);
    EXPECT_FALSE(chunks.plan(begin, end - begin, values.get() + begin).empty());
    placed.dataset.close();
}

TEST(DirectChunks, DeclinesWhatIsNotWholeAlignedChunks) {
    TempDir dir;
    if (!takes_direct_io(dir.path())) {
        // Nothing to decline on this file system: everything is declined (see above).
        SUCCEED() << dir.path() << " refuses O_DIRECT";
        return;
    }
    const std::string path = dir.file("declines.h5");
    const testing::PageAlignedFloats values = counting(kElements + 1024, 1.0f);
    File file = File::create(path, {}, FileTuning{4096, false});
    Dataset whole = make(file, "/whole", {1, 2, 32, 32});
    Dataset rows = make(file, "/rows", {1, 1, 16, 32});  // cut inside a leading index: still runs of 2 KiB
    Dataset gzip = make(file, "/gzip", {1, 2, 32, 32}, 4);
    Dataset across = make(file, "/across", {2, 1, 32, 32});  // 2 x 1 x 32 x 32: not one run
    file.flush();

    DirectChunks chunks(path, whole);
    ASSERT_TRUE(chunks.usable());
    EXPECT_FALSE(chunks.write(kChunk / 2, kChunk, values.get())) << "starts inside a chunk";
    EXPECT_FALSE(chunks.write(0, kChunk + 1, values.get())) << "ends inside a chunk";
    EXPECT_FALSE(chunks.write(0, kChunk, values.get() + 1)) << "memory off a page bound";
    EXPECT_FALSE(chunks.write(7 * kChunk, 2 * kChunk, values.get())) << "past the dataset";
    EXPECT_FALSE(chunks.write(0, 0, values.get())) << "nothing";
    EXPECT_EQ(chunks.written(), 0u);

    EXPECT_FALSE(DirectChunks(path, rows).usable()) << "chunks of 2 KiB: not whole pages";
    EXPECT_FALSE(DirectChunks(path, gzip).usable()) << "filtered chunks change size";
    EXPECT_FALSE(DirectChunks(path, across).usable()) << "a chunk in two runs";

    // Without the file's alignment, chunks lie anywhere: declined at the first such chunk.
    const std::string unaligned_path = dir.file("unaligned.h5");
    File unaligned = File::create(unaligned_path);
    Dataset small = make(unaligned, "/small", {1, 1, 1, 32});  // a 128-byte object first
    Dataset placed = make(unaligned, "/placed", {1, 2, 32, 32});
    unaligned.flush();
    DirectChunks anywhere(unaligned_path, placed);
    ASSERT_TRUE(anywhere.usable());
    bool any_declined = false;
    for (std::uint64_t chunk = 0; chunk < 8; ++chunk) {
        any_declined = any_declined || !anywhere.write(chunk * kChunk, kChunk, values.get());
    }
    EXPECT_TRUE(any_declined) << "every chunk of an unaligned file on a page bound";
}

}  // namespace
}  // namespace attnbatch::io
