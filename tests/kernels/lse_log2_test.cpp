// log2_positive (simd.hpp), the vector log2 of lse = ln 2 * (m + log2 l): within 2^-50 of libm's
// log2 (relative beyond 1, absolute below: the atanh series' few roundings of s, the series and
// 2 / ln 2, about 5 ulps of a result near 0.5) over the sums a row can have, exact at powers of
// two, and lse rounded to
// float from it equal to lse from the libm call (what the kernel computed before) on all but
// the rare doubles that lie within those ulps of a float rounding bound.
#define ATTNBATCH_ISA_NAMESPACE isa_lse_test
#define ATTNBATCH_VECTOR_BYTES 16
#include "simd.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace attnbatch::test {
namespace {

namespace lanes = kernels::isa_lse_test;

double log2_of(double x) {
    lanes::DVec v;
    for (int i = 0; i < lanes::kDoubleLanes; ++i) v[i] = x;
    return lanes::log2_positive(v)[0];
}

double bound(double want) { return std::ldexp(std::fmax(1.0, std::fabs(want)), -50); }

TEST(LseLog2, Within2PowMinus50OfLibmOverRowSums) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> exponent(-30.0, 40.0);
    double worst = 0;
    for (int n = 0; n < 200000; ++n) {
        const float x = static_cast<float>(std::exp2(exponent(rng)));  // row sums are floats
        const double want = std::log2(static_cast<double>(x));
        const double got = log2_of(x);
        worst = std::fmax(worst, std::fabs(got - want) / bound(want));
        ASSERT_LE(std::fabs(got - want), bound(want)) << "x = " << x;
    }
    RecordProperty("worst_fraction_of_bound", std::to_string(worst));
}

TEST(LseLog2, ExactAtPowersOfTwoAndAcrossTheMantissaSplit) {
    for (int e = -126; e <= 127; ++e) EXPECT_EQ(log2_of(std::ldexp(1.0, e)), static_cast<double>(e)) << e;
    for (const double x : {1.4142134, 1.4142137, 0.70710677, 2.8284271}) {
        EXPECT_NEAR(log2_of(x), std::log2(x), bound(std::log2(x))) << x;
    }
}

TEST(LseLog2, LseAsFloatMatchesTheLibmCallAlmostAlways) {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> shift(-60.0f, 60.0f), sum(0.5f, 65536.0f);
    int differing = 0;
    constexpr int kRows = 200000;
    for (int n = 0; n < kRows; ++n) {
        const float m = shift(rng), l = sum(rng);
        const double ln2 = 0.6931471805599453;
        const float libm = static_cast<float>((static_cast<double>(m) + std::log2(static_cast<double>(l))) * ln2);
        const float ours = static_cast<float>((static_cast<double>(m) + log2_of(l)) * ln2);
        if (libm != ours) {
            ++differing;
            EXPECT_EQ(std::fabs(libm - ours), std::fabs(std::nextafter(libm, ours) - libm)) << "more than one float ulp apart";
        }
    }
    // A double a few ulps from a float bound: about 2^-28 of the rows each.
    EXPECT_LE(differing, 2) << "of " << kRows;
}

}  // namespace
}  // namespace attnbatch::test
