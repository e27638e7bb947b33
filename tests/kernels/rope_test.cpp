// Rotary embeddings (kernels/rope.hpp): the float rotation against the double one, rows
// rotated in any split of a sequence equal to those rows of the whole sequence bit for bit
// (the position is the absolute row index), in place equal to out of place, padding rows
// left as they are, and the Hugging Face pair layout (i, i + d/2) checked on a hand example.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "attnbatch/kernels/rope.hpp"

namespace attnbatch::test {
namespace {

namespace k = attnbatch::kernels;

constexpr int kHeads = 3, kRows = 37, kDim = 16, kBatch = 2;

std::vector<float> random_rows(std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
    std::vector<float> x(static_cast<std::size_t>(kBatch) * kRows * kHeads * kDim);
    for (float& value : x) value = uniform(rng);
    return x;
}

// (B, L, H*d): heads side by side, as projections leave them.
k::TensorStrides packed() { return {kRows * kHeads * kDim, kDim, kHeads * kDim}; }

struct Table {
    std::vector<float> cos, sin;
};

Table table(double theta, std::int64_t first, int rows) {
    Table t{std::vector<float>(static_cast<std::size_t>(rows) * kDim / 2), std::vector<float>(static_cast<std::size_t>(rows) * kDim / 2)};
    k::rope_table(theta, kDim, first, rows, t.cos.data(), t.sin.data());
    return t;
}

void rotate(const float* in, float* out, int rows, int row_offset, const Table& t, const std::int32_t* lengths = nullptr) {
    k::RopeParams p;
    p.in = in;
    p.in_strides = packed();
    p.out = out;
    p.out_strides = packed();
    p.batch = kBatch;
    p.heads = kHeads;
    p.rows = rows;
    p.dim = kDim;
    p.lengths = lengths;
    p.row_offset = row_offset;
    p.cos_table = t.cos.data();
    p.sin_table = t.sin.data();
    k::apply_rope(p, 2);
}

TEST(Rope, MatchesTheDoublePrecisionRotation) {
    const std::vector<float> x = random_rows(1);
    std::vector<float> y(x.size());
    const double theta = 10000.0;
    rotate(x.data(), y.data(), kRows, 0, table(theta, 0, kRows));
    double worst = 0;
    for (int b = 0; b < kBatch; ++b)
        for (int r = 0; r < kRows; ++r)
            for (int h = 0; h < kHeads; ++h) {
                const std::size_t at = ((static_cast<std::size_t>(b) * kRows + r) * kHeads + h) * kDim;
                std::vector<double> row(x.begin() + static_cast<std::ptrdiff_t>(at), x.begin() + static_cast<std::ptrdiff_t>(at + kDim));
                k::apply_rope_f64(theta, kDim, r, row.data());
                for (int c = 0; c < kDim; ++c) worst = std::max(worst, std::fabs(row[c] - y[at + c]));
            }
    // |x| <= 3 and two products per element: a few float roundings of values below 6.
    EXPECT_LT(worst, 8 * 6 * 1.2e-7);
}

TEST(Rope, AnySplitOfRowsGivesTheWholeSequencesBits) {
    const std::vector<float> x = random_rows(2);
    const Table whole_table = table(500.0, 0, kRows);
    std::vector<float> whole(x.size());
    rotate(x.data(), whole.data(), kRows, 0, whole_table);
    for (const int q0 : {1, 5, 16, 36}) {
        // Rows [q0, L) alone: their own table from position q0, and the whole table at an offset.
        const int rows = kRows - q0;
        const std::size_t skip = static_cast<std::size_t>(q0) * kHeads * kDim;
        std::vector<float> part(x.size(), -1.0f);
        rotate(x.data() + skip, part.data() + skip, rows, 0, table(500.0, q0, rows));
        std::vector<float> offset(x.size(), -1.0f);
        rotate(x.data() + skip, offset.data() + skip, rows, q0, whole_table);
        for (int b = 0; b < kBatch; ++b) {
            const std::size_t from = static_cast<std::size_t>(b) * kRows * kHeads * kDim + skip;
            const std::size_t bytes = static_cast<std::size_t>(rows) * kHeads * kDim * sizeof(float);
            EXPECT_EQ(std::memcmp(part.data() + from, whole.data() + from, bytes), 0) << "q0 = " << q0 << ", own table";
            EXPECT_EQ(std::memcmp(offset.data() + from, whole.data() + from, bytes), 0) << "q0 = " << q0 << ", row_offset";
        }
    }
}

TEST(Rope, InPlaceEqualsOutOfPlaceAndPaddingRowsStay) {
    std::vector<float> x = random_rows(3);
    const Table t = table(10000.0, 0, kRows);
    const std::int32_t lengths[kBatch] = {kRows, 9};
    std::vector<float> y(x.size());
    rotate(x.data(), y.data(), kRows, 0, t, lengths);
    const std::vector<float> original = x;
    rotate(x.data(), x.data(), kRows, 0, t, lengths);
    EXPECT_EQ(x, y);
    const std::size_t second = static_cast<std::size_t>(kRows) * kHeads * kDim;
    for (std::size_t i = second + 9 * kHeads * kDim; i < x.size(); ++i) ASSERT_EQ(x[i], original[i]) << "padding row changed";
    EXPECT_NE(x[second + 2 * kHeads * kDim], original[second + 2 * kHeads * kDim]) << "a valid row was not rotated";
}

TEST(Rope, PairsColumnIWithColumnIPlusHalfAsHuggingFaceDoes) {
    // d = 4, position 1, theta = 100: frequencies 1 and 1/10; x = (1, 0, 0, 0) turns in the
    // plane of columns 0 and 2 by 1 radian.
    double row[4] = {1, 0, 0, 0};
    k::apply_rope_f64(100.0, 4, 1, row);
    EXPECT_NEAR(row[0], std::cos(1.0), 1e-15);
    EXPECT_NEAR(row[2], std::sin(1.0), 1e-15);
    EXPECT_EQ(row[1], 0.0);
    EXPECT_EQ(row[3], 0.0);
    double other[4] = {0, 1, 0, 0};
    k::apply_rope_f64(100.0, 4, 1, other);
    EXPECT_NEAR(other[1], std::cos(0.1), 1e-15);
    EXPECT_NEAR(other[3], std::sin(0.1), 1e-15);
}

TEST(Rope, RefusesAnOddWidth) {
    float cos[8], sin[8];
    EXPECT_THROW(k::rope_table(10000.0, 5, 0, 1, cos, sin), std::invalid_argument);
    EXPECT_THROW(k::rope_table(0.0, 4, 0, 1, cos, sin), std::invalid_argument);
}

}  // namespace
}  // namespace attnbatch::test
