// Rows [q0, q1) of a sequence computed on their own (q_offset = q0, len_q = q1 - q0) are those
// rows of a whole-sequence call bit for bit, whatever q0 (aligned to a tile or not), with or
// without causal masking, ragged lengths and weights; with causal masking the keys past q1 may
// be left out (len_k = q1). This is what lets the planner split a long sequence across ranks.
// Grouped-query attention: K/V shared by groups of query heads give the bits of the same K/V
// repeated for every head, and match the fp64 reference.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runnable_variants.hpp"
#include "support/kernel_test_support.hpp"

namespace attnbatch::test {
namespace {

// One call's inputs and outputs, contiguous (B, H, L, d) with K/V of G heads.
struct Call {
    int batch = 2, heads = 4, kv_heads = 4, len = 0, dim_k = 32, dim_v = 24;
    bool causal = false;
    std::vector<std::int32_t> lengths;
    std::vector<float> q, k, v;  // (B, H, L, dk), (B, G, L, dk), (B, G, L, dv)
};

Call make_call(int len, int heads, int kv_heads, bool causal, std::uint32_t seed) {
    Call c;
    c.len = len;
    c.heads = heads;
    c.kv_heads = kv_heads;
    c.causal = causal;
    c.lengths = {len, len * 2 / 3};
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
    const auto fill = [&](std::vector<float>& x, std::size_t count) {
        x.resize(count);
        for (float& value : x) value = uniform(rng);
    };
    fill(c.q, static_cast<std::size_t>(c.batch) * heads * len * c.dim_k);
    fill(c.k, static_cast<std::size_t>(c.batch) * kv_heads * len * c.dim_k);
    fill(c.v, static_cast<std::size_t>(c.batch) * kv_heads * len * c.dim_v);
    return c;
}

struct Result {
    std::vector<float> out, lse, weights;
};

// Rows [q0, q1) with keys [0, len_k) of every sequence and head.
Result run(const Call& c, const Variant& variant, int q0, int q1, int len_k, kn::WeightsMode weights) {
    const int rows = q1 - q0;
    kn::AttentionParams p;
    p.batch = c.batch;
    p.heads = c.heads;
    p.kv_heads = c.kv_heads;
    p.len_q = rows;
    p.q_offset = q0;
    p.len_k = len_k;
    p.dim_k = c.dim_k;
    p.dim_v = c.dim_v;
    p.scale = 0.2f;
    p.causal = c.causal;
    p.lengths = c.lengths.data();
    p.q = c.q.data() + static_cast<std::size_t>(q0) * c.dim_k;
    p.q_strides = {static_cast<std::ptrdiff_t>(c.heads) * c.len * c.dim_k, static_cast<std::ptrdiff_t>(c.len) * c.dim_k, c.dim_k};
    p.k = c.k.data();
    p.k_strides = {static_cast<std::ptrdiff_t>(c.kv_heads) * c.len * c.dim_k, static_cast<std::ptrdiff_t>(c.len) * c.dim_k, c.dim_k};
    p.v = c.v.data();
    p.v_strides = {static_cast<std::ptrdiff_t>(c.kv_heads) * c.len * c.dim_v, static_cast<std::ptrdiff_t>(c.len) * c.dim_v, c.dim_v};
    Result r;
    r.out.assign(static_cast<std::size_t>(c.batch) * c.heads * rows * c.dim_v, -7.0f);
    r.lse.assign(static_cast<std::size_t>(c.batch) * c.heads * rows, -7.0f);
    p.out = r.out.data();
    p.out_strides = {static_cast<std::ptrdiff_t>(c.heads) * rows * c.dim_v, static_cast<std::ptrdiff_t>(rows) * c.dim_v, c.dim_v};
    p.lse = r.lse.data();
    if (weights != kn::WeightsMode::none) {
        const int weight_heads = weights == kn::WeightsMode::all ? c.heads : 1;
        r.weights.assign(static_cast<std::size_t>(c.batch) * weight_heads * rows * len_k, -7.0f);
        p.weights = r.weights.data();
        p.weights_mode = weights;
    }
    const kn::KernelOptions options = options_for(variant, 2);
    std::vector<unsigned char> workspace(kn::attention_workspace_bytes(p, options));
    kn::attention_forward(p, options, workspace.data(), workspace.size());
    return r;
}

// Rows [q0, q1) of every (sequence, head) of a whole-sequence result with `rows` rows per head;
// `width` values per row; rows of `heads` heads.
std::vector<float> rows_of(const std::vector<float>& whole, int groups, int rows, int width, int q0, int q1) {
    std::vector<float> slice;
    for (int g = 0; g < groups; ++g) {
        const auto first = whole.begin() + (static_cast<std::ptrdiff_t>(g) * rows + q0) * width;
        slice.insert(slice.end(), first, first + static_cast<std::ptrdiff_t>(q1 - q0) * width);
    }
    return slice;
}

// Weights of rows computed with len_k keys, widened to `len` columns with the zeros a
// whole-sequence call writes past them.
std::vector<float> widen(const std::vector<float>& weights, int len_k, int len) {
    std::vector<float> wide;
    for (std::size_t row = 0; row < weights.size() / len_k; ++row) {
        wide.insert(wide.end(), weights.begin() + static_cast<std::ptrdiff_t>(row * len_k),
                    weights.begin() + static_cast<std::ptrdiff_t>((row + 1) * len_k));
        wide.insert(wide.end(), static_cast<std::size_t>(len - len_k), 0.0f);
    }
    return wide;
}

class RowSlices : public VariantTest {};

TEST_P(RowSlices, RowsComputedApartAreTheRowsOfTheWholeSequence) {
    const bool reference = GetParam().kind == kn::KernelKind::reference;
    const int len = reference ? 70 : 230;  // several query and key tiles for the blocked kernel
    for (const bool causal : {false, true}) {
        for (const kn::WeightsMode mode : {kn::WeightsMode::none, kn::WeightsMode::all, kn::WeightsMode::mean_over_heads}) {
            const Call c = make_call(len, 4, 4, causal, causal ? 5u : 6u);
            const Result whole = run(c, GetParam(), 0, len, len, mode);
            const int groups = c.batch * c.heads;
            const int weight_groups = c.batch * (mode == kn::WeightsMode::all ? c.heads : 1);
            // Cuts inside tiles and row blocks, a single row, and a slice past the shorter
            // sequence's length (its rows are all masked there).
            const int a = len * 2 / 5, b = len * 2 / 3 + 3;
            const std::vector<std::pair<int, int>> slices = {{0, 13}, {13, a}, {a, a + 1}, {a + 1, len - 1}, {len - 1, len}, {b, len}};
            for (const auto& [q0, q1] : slices) {
                SCOPED_TRACE("causal=" + std::to_string(causal) + " mode=" + std::to_string(static_cast<int>(mode)) +
                             " rows [" + std::to_string(q0) + ", " + std::to_string(q1) + ")");
                // With causal masking the keys past q1 are never seen: leave them out.
                for (const int len_k : causal ? std::vector<int>{len, q1} : std::vector<int>{len}) {
                    const Result part = run(c, GetParam(), q0, q1, len_k, mode);
                    EXPECT_TRUE(bit_identical(part.out, rows_of(whole.out, groups, len, c.dim_v, q0, q1))) << "out, len_k " << len_k;
                    EXPECT_TRUE(bit_identical(part.lse, rows_of(whole.lse, groups, len, 1, q0, q1))) << "lse, len_k " << len_k;
                    if (mode != kn::WeightsMode::none) {
                        EXPECT_TRUE(bit_identical(widen(part.weights, len_k, len), rows_of(whole.weights, weight_groups, len, len, q0, q1)))
                            << "weights, len_k " << len_k;
                    }
                }
            }
        }
    }
}

TEST_P(RowSlices, SharedKeyValueHeadsGiveTheBitsOfRepeatedOnes) {
    const int len = GetParam().kind == kn::KernelKind::reference ? 40 : 150;
    for (const int kv_heads : {1, 2, 4}) {
        SCOPED_TRACE("kv_heads=" + std::to_string(kv_heads));
        const Call grouped = make_call(len, 8, kv_heads, true, 9);
        // The same K/V written out once per query head.
        Call repeated = grouped;
        repeated.kv_heads = 8;
        const int group = 8 / kv_heads;
        for (auto* x : {&repeated.k, &repeated.v}) {
            const std::vector<float>& source = x == &repeated.k ? grouped.k : grouped.v;
            const std::size_t per_head = static_cast<std::size_t>(len) * (x == &repeated.k ? grouped.dim_k : grouped.dim_v);
            x->clear();
            for (int b = 0; b < grouped.batch; ++b) {
                for (int h = 0; h < 8; ++h) {
                    const auto first = source.begin() + static_cast<std::ptrdiff_t>((b * kv_heads + h / group) * per_head);
                    x->insert(x->end(), first, first + static_cast<std::ptrdiff_t>(per_head));
                }
            }
        }
        for (const kn::WeightsMode mode : {kn::WeightsMode::none, kn::WeightsMode::all, kn::WeightsMode::mean_over_heads}) {
            const Result a = run(grouped, GetParam(), 0, len, len, mode), b = run(repeated, GetParam(), 0, len, len, mode);
            EXPECT_TRUE(bit_identical(a.out, b.out)) << "out";
            EXPECT_TRUE(bit_identical(a.lse, b.lse)) << "lse";
            EXPECT_TRUE(bit_identical(a.weights, b.weights)) << "weights";
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Kernels, RowSlices, ::testing::ValuesIn(all_variants()), variant_test_name);

// The fp64 reference itself follows the GQA rule: query head h of a grouped call equals a
// one-head call with K/V head h / (H / G), computed apart.
TEST(GroupedQueryReference, EachQueryHeadReadsItsGroupsKeysAndValues) {
    const Call c = make_call(33, 6, 2, false, 11);
    kn::AttentionParams p;
    p.batch = c.batch;
    p.heads = 6;
    p.kv_heads = 2;
    p.len_q = p.len_k = c.len;
    p.dim_k = c.dim_k;
    p.dim_v = c.dim_v;
    p.scale = 0.2f;
    p.lengths = c.lengths.data();
    p.q = c.q.data();
    p.q_strides = {6L * c.len * c.dim_k, static_cast<std::ptrdiff_t>(c.len) * c.dim_k, c.dim_k};
    p.k = c.k.data();
    p.k_strides = {2L * c.len * c.dim_k, static_cast<std::ptrdiff_t>(c.len) * c.dim_k, c.dim_k};
    p.v = c.v.data();
    p.v_strides = {2L * c.len * c.dim_v, static_cast<std::ptrdiff_t>(c.len) * c.dim_v, c.dim_v};
    std::vector<double> out(static_cast<std::size_t>(c.batch) * 6 * c.len * c.dim_v);
    kn::ReferenceOutputs o;
    o.out = out.data();
    kn::reference_attention_f64(p, o);
    for (int b = 0; b < c.batch; ++b) {
        for (int h = 0; h < 6; ++h) {
            kn::AttentionParams one = p;
            one.batch = 1;
            one.heads = one.kv_heads = 1;
            one.lengths = c.lengths.data() + b;
            one.q = p.q + b * p.q_strides.seq + h * p.q_strides.head;
            one.k = p.k + b * p.k_strides.seq + (h / 3) * p.k_strides.head;
            one.v = p.v + b * p.v_strides.seq + (h / 3) * p.v_strides.head;
            std::vector<double> single(static_cast<std::size_t>(c.len) * c.dim_v);
            kn::ReferenceOutputs so;
            so.out = single.data();
            kn::reference_attention_f64(one, so);
            const double* grouped = out.data() + (static_cast<std::size_t>(b) * 6 + h) * c.len * c.dim_v;
            EXPECT_EQ(std::memcmp(grouped, single.data(), single.size() * sizeof(double)), 0) << "b " << b << " h " << h;
        }
    }
}

}  // namespace
}  // namespace attnbatch::test
