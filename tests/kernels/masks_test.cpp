// Masking (docs/formats.md): key j of sequence b is masked when j >= lengths[b], or j > i with causal;
// rows i >= lengths[b] are exact zeros in out and weights and -inf in lse. Also the layouts:
// strided inputs and outputs, and nothing written between the rows of out.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "runnable_variants.hpp"
#include "support/kernel_test_support.hpp"

namespace attnbatch::test {
namespace {

class Masks : public VariantTest {};

// Lengths 0 (the whole sequence masked), 1, L and two in between, one of them a tile edge.
Shape ragged_shape(bool causal, Layout layout) {
    Shape s;
    s.lengths = {70, 0, 1, 33, 64};
    s.batch = 5;
    s.heads = 3;
    s.len_q = s.len_k = 70;
    s.dim_k = 24;
    s.dim_v = 40;
    s.causal = causal;
    s.layout = layout;
    return s;
}

// Checks every entry the mask decides: zero rows past the length, -inf lse there, zero
// weights on masked keys, finite lse on valid rows.
void expect_mask_respected(const Shape& s, const Outputs& o, bool mean) {
    const std::size_t lq = s.len_q, lk = s.len_k, dv = s.dim_v;
    std::size_t bad_out = 0, bad_lse = 0, bad_weights = 0;
    for (int b = 0; b < s.batch; ++b) {
        const int n = s.lengths.empty() ? s.len_q : s.lengths[static_cast<std::size_t>(b)];
        for (int h = 0; h < s.heads; ++h) {
            for (int i = 0; i < s.len_q; ++i) {
                const std::size_t row = (static_cast<std::size_t>(b) * s.heads + h) * lq + i;
                const bool valid_row = i < n;
                for (std::size_t c = 0; c < dv; ++c) {
                    if (!valid_row && o.out[row * dv + c] != 0.0f) ++bad_out;
                }
                const float lse = o.lse[row];
                if (valid_row ? !std::isfinite(lse) : lse != -std::numeric_limits<float>::infinity()) ++bad_lse;
                const std::size_t wrow = mean ? static_cast<std::size_t>(b) * lq + i : row;
                if (mean && h > 0) continue;
                for (int j = 0; j < s.len_k; ++j) {
                    const bool masked = !valid_row || j >= n || (s.causal && j > i);
                    const float w = o.weights[wrow * lk + j];
                    if (masked ? w != 0.0f : !(w >= 0.0f)) ++bad_weights;
                }
            }
        }
    }
    EXPECT_EQ(bad_out, 0u) << "out entries of rows past the length that are not exactly zero";
    EXPECT_EQ(bad_lse, 0u) << "lse not -inf past the length, or not finite before it";
    EXPECT_EQ(bad_weights, 0u) << "masked weights not exactly zero, or valid weights negative/NaN";
}

TEST_P(Masks, MaskedRowsAndKeysAreExactZeros) {
    for (bool causal : {false, true}) {
        for (kn::WeightsMode mode : {kn::WeightsMode::all, kn::WeightsMode::mean_over_heads}) {
            for (kn::WeightsType type : {kn::WeightsType::f32, kn::WeightsType::f16}) {
                const Shape s = ragged_shape(causal, Layout::padded);
                SCOPED_TRACE(s.describe() + (mode == kn::WeightsMode::all ? " weights=all" : " weights=mean") +
                             (type == kn::WeightsType::f16 ? " f16" : " f32"));
                const Problem problem = make_problem(s, 11);
                const Outputs o = run_kernel(problem, options_for(GetParam()), {true, mode, type});
                expect_mask_respected(s, o, mode == kn::WeightsMode::mean_over_heads);
            }
        }
    }
}

// A sequence of length 0 next to full ones: everything about it is zero or -inf, and its
// neighbours are unaffected (checked against the reference elsewhere; here only the masks).
TEST_P(Masks, EmptySequencesAreAllZeroAndMinusInfinity) {
    Shape s;
    s.lengths = {0, 5, 0};
    s.batch = 3;
    s.heads = 2;
    s.len_q = s.len_k = 9;
    s.dim_k = s.dim_v = 8;
    for (bool causal : {false, true}) {
        s.causal = causal;
        SCOPED_TRACE(s.describe());
        const Problem problem = make_problem(s, 12);
        const Outputs o = run_kernel(problem, options_for(GetParam()), {true, kn::WeightsMode::all, kn::WeightsType::f32});
        expect_mask_respected(s, o, false);
        const std::size_t per_sequence_rows = static_cast<std::size_t>(s.heads) * s.len_q;
        for (std::size_t r = 0; r < per_sequence_rows; ++r) {
            EXPECT_EQ(o.lse[r], -std::numeric_limits<float>::infinity());
            EXPECT_EQ(o.lse[2 * per_sequence_rows + r], -std::numeric_limits<float>::infinity());
        }
    }
}

// Padding tokens may hold anything (a file's unused tail): with NaN there, results must be
// the very same bits as with finite padding, since masked keys contribute exactly nothing.
TEST_P(Masks, PaddingContentDoesNotLeak) {
    for (bool causal : {false, true}) {
        Shape s = ragged_shape(causal, Layout::contiguous);
        SCOPED_TRACE(s.describe());
        const Problem clean = make_problem(s, 13);
        s.poison_padding = true;
        const Problem poisoned = make_problem(s, 13);
        for (kn::WeightsMode mode : {kn::WeightsMode::all, kn::WeightsMode::mean_over_heads}) {
            const Request request{true, mode, kn::WeightsType::f32};
            const Outputs a = run_kernel(clean, options_for(GetParam()), request);
            const Outputs b = run_kernel(poisoned, options_for(GetParam()), request);
            EXPECT_EQ(count_nans(b.out) + count_nans(b.lse) + count_nans(b.weights), 0u) << "NaN leaked from the padding";
            EXPECT_TRUE(bit_identical(a.out, b.out)) << "out depends on padding content";
            EXPECT_TRUE(bit_identical(a.lse, b.lse)) << "lse depends on padding content";
            EXPECT_TRUE(bit_identical(a.weights, b.weights)) << "weights depend on padding content";
        }
    }
}

// The same logical tensors in (B, H, L, d), [B, L, H*d] and padded layouts. The kernels copy
// inputs into their own tiles, so the layout changes no arithmetic: results are bit-identical.
// run_kernel also checks that no element between the rows of a padded out was written.
TEST_P(Masks, StridedLayoutsGiveIdenticalResults) {
    for (bool causal : {false, true}) {
        Outputs baseline;
        for (Layout layout : {Layout::contiguous, Layout::heads_packed, Layout::padded}) {
            const Shape s = ragged_shape(causal, layout);
            SCOPED_TRACE(s.describe());
            const Problem problem = make_problem(s, 14);
            const Outputs o = run_kernel(problem, options_for(GetParam()), {true, kn::WeightsMode::all, kn::WeightsType::f32});
            if (layout == Layout::contiguous) {
                baseline = o;
                continue;
            }
            EXPECT_TRUE(bit_identical(baseline.out, o.out));
            EXPECT_TRUE(bit_identical(baseline.lse, o.lse));
            EXPECT_TRUE(bit_identical(baseline.weights, o.weights));
        }
    }
}

// A causal row's shift comes from the keys it sees only. Here each key outscores every earlier
// one by 300 in the exponent's units (scale * log2(e) * q.k), so a row whose max took in the
// next key (the diagonal runs through the micro-tiles, where later keys sit beside visible ones)
// would see all its weights underflow and give zeros or NaN. Row i weighs key i by 1 - 2^-300,
// so out row i is value row i, up to fp32 roundings and, on the bf16 backends, V's rounding to
// bf16 (8 significant bits: 2^-8 relative); its own weight is 1 within two fp32 roundings.
TEST_P(Masks, KeysPastTheDiagonalNeverShiftARow) {
    Shape s;
    s.len_q = s.len_k = 70;  // the diagonal crosses several key panels and row blocks
    s.dim_k = 8;
    s.dim_v = 16;
    s.causal = true;
    Problem problem = make_problem(s, 15);
    const double per_key = 300.0 / (problem.scale * 1.4426950408889634);
    for (int i = 0; i < s.len_q; ++i) {
        for (int c = 0; c < s.dim_k; ++c) {
            problem.q[static_cast<std::size_t>(i) * s.dim_k + c] = c == 0 ? 1.0f : 0.0f;
            problem.k[static_cast<std::size_t>(i) * s.dim_k + c] = c == 0 ? static_cast<float>(i * per_key) : 0.0f;
        }
    }
    const Outputs o = run_kernel(problem, options_for(GetParam()), {true, kn::WeightsMode::all, kn::WeightsType::f32});
    // P of key i is 2^r with r the rounding residue of the shift, not exactly 1, and O / l = (v P)
    // (1 / P) takes three fp32 roundings: 2^-21 covers them.
    const double relative = (GetParam().precision == kn::Precision::bf16 ? 1.0 / 256 : 0.0) + std::ldexp(1.0, -21);
    std::size_t off = 0;
    for (int i = 0; i < s.len_q; ++i) {
        for (int c = 0; c < s.dim_v; ++c) {
            const double want = problem.v[static_cast<std::size_t>(i) * s.dim_v + c];
            const double got = o.out[static_cast<std::size_t>(i) * s.dim_v + c];
            if (!(std::fabs(got - want) <= relative * std::fabs(want))) ++off;
        }
        // Its own weight is P / l of one P: two fp32 roundings from 1 at most (the reciprocal, the product).
        const double own = o.weights[static_cast<std::size_t>(i) * s.len_k + i];
        if (!(std::fabs(own - 1.0) <= 2.5e-7)) ++off;
    }
    EXPECT_EQ(off, 0u) << "rows not equal to their own value row (or own weight not 1): a later key moved the shift";
}

INSTANTIATE_TEST_SUITE_P(Kernels, Masks, ::testing::ValuesIn(all_variants()), variant_test_name);

}  // namespace
}  // namespace attnbatch::test
