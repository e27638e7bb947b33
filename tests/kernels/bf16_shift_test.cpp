// The bf16 dot-product path shifts a row's exponentials by its first panel's largest score and
// raises the shift only where a later panel's scores exceed it by more than 8 (in log2 units),
// rescaling what the row has so far (bf16_products.hpp, fused_probabilities). On the random
// inputs of the other tests that rarely happens. Here every row's scores climb along its keys:
// 2.6 (log2 units) per panel of 32 keys over three key tiles, and 9 per panel over 100 keys, so
// that rows raise their shifts every few panels or at every one. Outputs, lse and weights must
// still meet the bf16 rule against the fp64 reference, and be the same bits on 1 and 3 threads.
// (A rescale by a power too many, from a shift difference rounded off a whole number, lost a
// tenth of some rows' sums; the second shape showed it.)
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "runnable_variants.hpp"

namespace attnbatch::test {
namespace {

// Scores scale * q.k rise by `rise` (natural units) from the first key to the last: the first
// coordinate of every query is kHeight and that of key j is kHeight * rise / (scale * kHeight^2)
// * j / (Lk - 1), on top of the uniform entries make_problem drew.
Problem rising_scores(const Shape& shape, float rise) {
    Problem pr = make_problem(shape, 77);
    constexpr float kHeight = 4.0f;
    const float slope = rise / (pr.scale * kHeight * kHeight) / static_cast<float>(shape.len_k - 1);
    for (int b = 0; b < shape.batch; ++b) {
        for (int h = 0; h < shape.heads; ++h) {
            // Tokens past a sequence's length keep what make_problem put there.
            const int valid = shape.lengths.empty() ? shape.len_k : shape.lengths[b];
            for (int i = 0; i < valid; ++i) {
                pr.q[b * pr.q_strides.seq + h * pr.q_strides.head + i * pr.q_strides.row] = kHeight;
            }
            for (int j = 0; j < valid; ++j) {
                pr.k[b * pr.k_strides.seq + h * pr.k_strides.head + j * pr.k_strides.row] =
                    kHeight * slope * static_cast<float>(j);
            }
        }
    }
    return pr;
}

class Bf16ShiftRaises : public VariantTest {};

TEST_P(Bf16ShiftRaises, RisingScoresMeetTheBf16RuleOnAnyThreadCount) {
    struct Climb {
        int keys;
        float rise;  // natural units over the keys
    };
    // 62 natural units = 90 in log2 units over 1100 keys: 2.6 per panel of 32; 20 over 100
    // keys: 9.
    for (const Climb climb : {Climb{1100, 62.0f}, Climb{100, 20.0f}})
    for (const bool causal : {false, true}) {
        Shape shape;  // ragged, d_v != d_k
        shape.batch = 2;
        shape.heads = 2;
        shape.len_q = shape.len_k = climb.keys;
        shape.dim_k = 16;
        shape.dim_v = 24;
        shape.causal = causal;
        shape.lengths = {climb.keys, climb.keys * 7 / 11};
        SCOPED_TRACE(shape.describe());
        const Problem problem = rising_scores(shape, climb.rise);
        const Reference64 ref = reference_f64(problem, true, false);
        const Naive32 naive = naive_bf16(problem);
        const Request request{true, kn::WeightsMode::all, kn::WeightsType::f32};
        const Outputs got = run_kernel(problem, options_for(GetParam(), 1), request);
        expect_close_to_reference("out", got.out, naive.out, ref.out);
        expect_close_to_reference("lse", got.lse, naive.lse, ref.lse);
        expect_close_to_reference("weights", got.weights, naive.weights, ref.weights);
        const Outputs three = run_kernel(problem, options_for(GetParam(), 3), request);
        EXPECT_TRUE(bit_identical(got.out, three.out));
        EXPECT_TRUE(bit_identical(got.lse, three.lse));
        EXPECT_TRUE(bit_identical(got.weights, three.weights));
    }
}

INSTANTIATE_TEST_SUITE_P(Kernels, Bf16ShiftRaises, ::testing::ValuesIn(bf16_variants()), variant_test_name);

}  // namespace
}  // namespace attnbatch::test
