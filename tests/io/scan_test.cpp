// Bounded scans cover every element once in row-major order; chunk shapes stay near the
// target and hold whole sequences when they can.
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"

#include "attnbatch/io/h5/chunking.hpp"
#include "attnbatch/io/h5/scan.hpp"

#include <cmath>
#include <limits>

namespace attnbatch::io {
namespace {

using testing::TempDir;

TEST(ChunkShape, WholeSequencesWhenTheyFit) {
    EXPECT_EQ(chunk_shape({1000, 128, 64}, 4), (Dims{32, 128, 64}));  // 32 KiB sequences, 1 MiB chunks
    EXPECT_EQ(chunk_shape({3, 4, 4}, 4), (Dims{3, 4, 4}));           // all of it is smaller
    EXPECT_EQ(chunk_shape({100}, 4), (Dims{100}));
    EXPECT_EQ(chunk_shape({1u << 20}, 4), (Dims{1u << 18}));
}

TEST(ChunkShape, SplitsBigSequencesAlongTheNextAxes) {
    EXPECT_EQ(chunk_shape({10, 8, 1024, 1024}, 4), (Dims{1, 1, 256, 1024}));
    EXPECT_EQ(chunk_shape({10, 8, 1024, 1024}, 2), (Dims{1, 1, 512, 1024}));
    EXPECT_EQ(chunk_shape({2, 1, 10000000}, 4), (Dims{1, 1, 262144}));
    for (const Dims& dims : {Dims{7, 3, 5000, 5000}, Dims{1, 1, 1, 1}, Dims{123457, 9}}) {
        const Dims chunk = chunk_shape(dims, 4);
        EXPECT_LE(element_count(chunk) * 4, std::size_t{1} << 20);
        for (std::size_t axis = 0; axis < dims.size(); ++axis) {
            EXPECT_GE(chunk[axis], 1u);
            EXPECT_LE(chunk[axis], dims[axis]);
        }
    }
    EXPECT_THROW(chunk_shape({0, 3}, 4), std::invalid_argument);
}

TEST(ScanBlocks, VisitsEveryElementOnceInOrderWithinTheBudget) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    const std::vector<double> values = testing::ramp64(5 * 7 * 3);
    testing::put(file, "/x", Datatype::float64(), {5, 7, 3}, values);
    const Dataset dataset = Dataset::open(file, "/x");
    for (const std::size_t budget : {std::size_t{1}, std::size_t{16}, std::size_t{24 * 8}, std::size_t{1} << 20}) {
        std::vector<double> seen;
        scan_blocks(dataset, budget, MemType::f64, [&](const Slab& block, const void* data, std::size_t count) {
            EXPECT_LE(count * 8, std::max<std::size_t>(budget, 8));
            EXPECT_EQ(count, element_count(block.count));
            const auto* block_values = static_cast<const double*>(data);
            seen.insert(seen.end(), block_values, block_values + count);
            return true;
        });
        EXPECT_EQ(seen, values) << "budget " << budget;
    }
}

TEST(ScanBlocks, StopsWhenTheVisitorSaysSo) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    testing::put(file, "/x", Datatype::int32(), {10}, std::vector<std::int32_t>(10, 1));
    int visits = 0;
    scan_blocks(Dataset::open(file, "/x"), 8, MemType::i64, [&](const Slab&, const void*, std::size_t) {
        ++visits;
        return false;
    });
    EXPECT_EQ(visits, 1);
}

// Found while writing fuzz/fuzz_input: a declared shape of 2^61 + 8299783 elements (each axis
// within int range, nothing stored: a 1.4 KB file) wrapped `inner * 8` to a small buffer that
// HDF5 then overran; 2^90 elements wrapped the count to 0 and skipped the scan. Only the first
// block is visited here: it must exist and stay within the budget.
TEST(ScanBlocks, HugeDeclaredShapesStayWithinTheBudget) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    DatasetCreation chunked;
    chunked.chunk = {1, 1, 4};
    Dataset::create(file, "/wrap", Datatype::float32(), {1, 2147437487, 1073764905}, chunked);
    chunked.chunk = {1, 1, 1, 4};
    Dataset::create(file, "/beyond_64_bits", Datatype::float32(), {1, 1u << 30, 1u << 30, 1u << 30}, chunked);
    for (const char* path : {"/wrap", "/beyond_64_bits"}) {
        int visits = 0;
        scan_blocks(Dataset::open(file, path), std::size_t{1} << 16, MemType::f64,
                    [&](const Slab& block, const void* data, std::size_t count) {
                        ++visits;
                        EXPECT_LE(count, (std::size_t{1} << 16) / 8) << path;
                        EXPECT_EQ(count, element_count(block.count)) << path;
                        EXPECT_EQ(static_cast<const double*>(data)[count - 1], 0.0) << path;  // the fill value
                        return false;
                    });
        EXPECT_EQ(visits, 1) << path;
    }
}

TEST(FindFirstNonFinite, ReportsTheFirstIndexWhateverTheBlocking) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    std::vector<float> values = testing::ramp(4 * 5 * 6);
    values[(2 * 5 + 3) * 6 + 4] = std::numeric_limits<float>::quiet_NaN();
    values[(3 * 5 + 0) * 6 + 1] = std::numeric_limits<float>::infinity();
    testing::put(file, "/x", Datatype::float32(), {4, 5, 6}, values);
    const Dataset dataset = Dataset::open(file, "/x");
    for (const std::size_t budget : {std::size_t{8}, std::size_t{40}, std::size_t{100}, default_scan_bytes}) {
        const auto bad = find_first_non_finite(dataset, budget);
        ASSERT_TRUE(bad.has_value());
        EXPECT_EQ(bad->index, (Dims{2, 3, 4})) << "budget " << budget;
        EXPECT_TRUE(std::isnan(bad->value));
    }
}

TEST(FindFirstNonFinite, FiniteDataAndTheMagnitudeLimit) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    testing::put(file, "/ok", Datatype::float32(), {3, 2}, testing::ramp(6));
    EXPECT_FALSE(find_first_non_finite(Dataset::open(file, "/ok")).has_value());
    testing::put(file, "/big", Datatype::float64(), {3}, std::vector<double>{1.0, 1e300, 2.0});
    EXPECT_FALSE(find_first_non_finite(Dataset::open(file, "/big")).has_value());
    const auto bad = find_first_non_finite(Dataset::open(file, "/big"), default_scan_bytes, 3.4e38);
    ASSERT_TRUE(bad.has_value());
    EXPECT_EQ(bad->index, Dims{1});
    EXPECT_EQ(bad->value, 1e300);
}

TEST(UnravelIndex, RowMajor) {
    EXPECT_EQ(unravel_index(0, {2, 3, 4}), (Dims{0, 0, 0}));
    EXPECT_EQ(unravel_index(23, {2, 3, 4}), (Dims{1, 2, 3}));
    EXPECT_EQ(unravel_index(13, {2, 3, 4}), (Dims{1, 0, 1}));
}

}  // namespace
}  // namespace attnbatch::io
