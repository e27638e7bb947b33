// The optional attention weights: rows are probability distributions, the head mean is the
// mean of the reference's per-head weights, and f16 weights are exactly the kernel's own f32
// weights rounded to nearest even (x86 builds convert with F16C, the rest in software).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attnbatch/kernels/half.hpp"
#include "runnable_variants.hpp"
#include "support/kernel_test_support.hpp"

namespace attnbatch::test {
namespace {

class Weights : public VariantTest {};

// Lk = 77 is not a multiple of 8, so vector conversions and their scalar tail both run.
Shape weights_shape(bool causal) {
    Shape s;
    s.lengths = {77, 0, 1, 50};
    s.batch = 4;
    s.heads = 3;
    s.len_q = s.len_k = 77;
    s.dim_k = 32;
    s.dim_v = 16;
    s.causal = causal;
    s.layout = Layout::heads_packed;
    return s;
}

const char* mode_name(kn::WeightsMode mode) { return mode == kn::WeightsMode::all ? "all" : "mean"; }

// Largest |row sum - 1| over the rows that have at least one valid key.
double worst_row_sum_error(const Shape& s, const std::vector<float>& weights, bool mean) {
    double worst = 0.0;
    const int heads = mean ? 1 : s.heads;
    for (int b = 0; b < s.batch; ++b) {
        const int n = s.lengths[static_cast<std::size_t>(b)];
        for (int h = 0; h < heads; ++h) {
            for (int i = 0; i < n; ++i) {
                const std::size_t row = (static_cast<std::size_t>(b) * heads + h) * s.len_q + i;
                double sum = 0.0;
                for (int j = 0; j < s.len_k; ++j) sum += weights[row * s.len_k + j];
                worst = std::fmax(worst, std::fabs(sum - 1.0));
            }
        }
    }
    return worst;
}

TEST_P(Weights, ValidRowsSumToOne) {
    for (bool causal : {false, true}) {
        for (kn::WeightsMode mode : {kn::WeightsMode::all, kn::WeightsMode::mean_over_heads}) {
            const Shape s = weights_shape(causal);
            SCOPED_TRACE(s.describe() + " weights=" + mode_name(mode));
            const Problem problem = make_problem(s, 21);
            const Outputs o = run_kernel(problem, options_for(GetParam()), {true, mode, kn::WeightsType::f32});
            EXPECT_EQ(count_nans(o.weights), 0u);
            EXPECT_LE(worst_row_sum_error(s, o.weights, mode == kn::WeightsMode::mean_over_heads), 1e-6);
        }
    }
}

TEST_P(Weights, MeanOverHeadsMatchesReferenceMean) {
    for (bool causal : {false, true}) {
        const Shape s = weights_shape(causal);
        SCOPED_TRACE(s.describe());
        const Problem problem = make_problem(s, 22);
        const Reference64 ref = reference_f64(problem, true, true);
        // The yardstick itself: the reference's head mean is the mean of its per-head weights.
        const std::size_t lq = s.len_q, lk = s.len_k;
        double self_error = 0.0;
        for (int b = 0; b < s.batch; ++b)
            for (std::size_t i = 0; i < lq; ++i)
                for (std::size_t j = 0; j < lk; ++j) {
                    double sum = 0.0;
                    for (int h = 0; h < s.heads; ++h) {
                        sum += ref.weights[((static_cast<std::size_t>(b) * s.heads + h) * lq + i) * lk + j];
                    }
                    const double mean = ref.weights_mean[(static_cast<std::size_t>(b) * lq + i) * lk + j];
                    self_error = std::fmax(self_error, std::fabs(sum / s.heads - mean));
                }
        EXPECT_LE(self_error, 1e-15);

        const Naive32 naive = naive_for(problem, GetParam());
        const Outputs o = run_kernel(problem, options_for(GetParam()),
                                     {true, kn::WeightsMode::mean_over_heads, kn::WeightsType::f32});
        expect_close_to_reference("mean weights", o.weights, naive.weights_mean, ref.weights_mean);
    }
}

// An f16 weight is the kernel's f32 weight w32 (error e32 <= the f32 bound of the ratio rule)
// rounded once: relative error 2^-11 in the normal range, absolute 2^-25 below 2^-14.
TEST_P(Weights, HalfWeightsWithinHalfPrecisionOfReference) {
    constexpr double kHalfRelative = 0x1p-11, kHalfSubnormal = 0x1p-25;
    for (bool causal : {false, true}) {
        for (kn::WeightsMode mode : {kn::WeightsMode::all, kn::WeightsMode::mean_over_heads}) {
            const bool mean = mode == kn::WeightsMode::mean_over_heads;
            const Shape s = weights_shape(causal);
            SCOPED_TRACE(s.describe() + " weights=" + mode_name(mode));
            const Problem problem = make_problem(s, 23);
            const Reference64 ref = reference_f64(problem, !mean, mean);
            const Naive32 naive = naive_for(problem, GetParam());
            const std::vector<double>& r = mean ? ref.weights_mean : ref.weights;
            const ErrorStats naive_error = error_stats(mean ? naive.weights_mean : naive.weights, r);
            const double e32 = 2.0 * naive_error.max_abs + 1e-6 * naive_error.max_ref;

            const Outputs o = run_kernel(problem, options_for(GetParam()), {true, mode, kn::WeightsType::f16});
            ASSERT_EQ(o.weights.size(), r.size());
            std::size_t violations = 0, first = 0;
            for (std::size_t x = 0; x < r.size(); ++x) {
                const double bound = e32 + kHalfRelative * (std::fabs(r[x]) + e32) + kHalfSubnormal;
                if (!(std::fabs(o.weights[x] - r[x]) <= bound) && violations++ == 0) first = x;
            }
            EXPECT_EQ(violations, 0u) << "first at " << first << ": f16 " << o.weights[first] << " vs ref "
                                      << r[first];
            // Rounding each entry moves a row sum by at most 2^-11 of it plus 2^-25 per entry.
            const double sum_bound = 1e-6 + kHalfRelative * (1.0 + 1e-6) + s.len_k * kHalfSubnormal;
            EXPECT_LE(worst_row_sum_error(s, o.weights, mean), sum_bound);
        }
    }
}

TEST_P(Weights, HalfWeightsAreTheRoundedFloatWeights) {
    for (bool causal : {false, true}) {
        for (kn::WeightsMode mode : {kn::WeightsMode::all, kn::WeightsMode::mean_over_heads}) {
            const Shape s = weights_shape(causal);
            SCOPED_TRACE(s.describe() + " weights=" + mode_name(mode));
            const Problem problem = make_problem(s, 24);
            const Outputs f32 = run_kernel(problem, options_for(GetParam()), {true, mode, kn::WeightsType::f32});
            const Outputs f16 = run_kernel(problem, options_for(GetParam()), {true, mode, kn::WeightsType::f16});
            ASSERT_EQ(f16.weights_f16.size(), f32.weights.size());
            std::size_t mismatches = 0, first = 0;
            for (std::size_t x = 0; x < f32.weights.size(); ++x) {
                if (f16.weights_f16[x] != kn::float_to_half(f32.weights[x]) && mismatches++ == 0) first = x;
            }
            EXPECT_EQ(mismatches, 0u) << "first at " << first << ": f32 " << f32.weights[first] << " -> "
                                      << kn::float_to_half(f32.weights[first]) << ", kernel f16 bits "
                                      << f16.weights_f16[first];
            // Asking for f16 weights must not change the other outputs.
            EXPECT_TRUE(bit_identical(f32.out, f16.out));
            EXPECT_TRUE(bit_identical(f32.lse, f16.lse));
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Kernels, Weights, ::testing::ValuesIn(all_variants()), variant_test_name);

}  // namespace
}  // namespace attnbatch::test
