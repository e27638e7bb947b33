// The generator behind `generate`: its normal quantile against Python's statistics module
// (the same AS241 algorithm), and the counter-based property the files rely on.
#include "random_field.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace attnbatch::cli {
namespace {

TEST(RandomField, QuantileMatchesAS241Reference) {
    const struct {
        double p, z;
    } cases[] = {{0.5, 0.0},
                 {0.975, 1.9599639845400536},
                 {0.025, -1.9599639845400538},
                 {0.3, -0.5244005127080407},
                 {0.9999, 3.7190164854557084},
                 {1e-10, -6.361340902404056},
                 {0x1p-54, -8.292361075813595}};
    for (const auto& c : cases) EXPECT_NEAR(standard_normal_quantile(c.p), c.z, 1e-14 * (1 + std::fabs(c.z))) << c.p;
}

TEST(RandomField, ValuesArePureFunctionsOfTheirCounters) {
    const RandomField field(42, 1);
    // Any order of evaluation gives the same number for the same (row, index).
    const double late = field.row(7).normal(1000);
    for (int i = 0; i < 100; ++i) static_cast<void>(field.row(static_cast<std::uint64_t>(i)).normal(0));
    EXPECT_EQ(field.row(7).normal(1000), late);
    EXPECT_NE(RandomField(42, 2).row(7).normal(1000), late);  // another stream
    EXPECT_NE(RandomField(43, 1).row(7).normal(1000), late);  // another seed
}

TEST(RandomField, UniformsStayInsideTheOpenInterval) {
    const RandomField::Row row = RandomField(1, 1).row(0);
    std::set<double> seen;
    double sum = 0, sum_sq = 0;
    constexpr int count = 20000;
    for (int i = 0; i < count; ++i) {
        const double u = row.uniform(static_cast<std::uint64_t>(i));
        ASSERT_GT(u, 0.0);
        ASSERT_LT(u, 1.0);
        seen.insert(u);
        const double z = row.normal(static_cast<std::uint64_t>(i));
        sum += z;
        sum_sq += z * z;
    }
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(count));
    EXPECT_NEAR(sum / count, 0.0, 0.05);
    EXPECT_NEAR(sum_sq / count, 1.0, 0.05);
}

}  // namespace
}  // namespace attnbatch::cli
