// Bad parameters are refused before any work: check_attention_params names the problem, and
// attention_forward throws std::invalid_argument with that message and writes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnbatch/kernels/projection.hpp"
#include "runnable_variants.hpp"
#include "support/kernel_test_support.hpp"

namespace attnbatch::test {
namespace {

// A small valid problem with every output bound to a guarded, poisoned buffer.
class Bound {
public:
    Bound()
        : problem_(make_problem(shape(), 61)),
          out_(problem_.out_span),
          lse_(static_cast<std::size_t>(2 * 2 * 5)),
          weights_(static_cast<std::size_t>(2 * 2 * 5 * 5)),
          lengths_{5, 3} {
        params = problem_.params();
        params.lengths = lengths_.data();
        params.out = out_.data();
        params.lse = lse_.data();
        params.weights = weights_.data();
        params.weights_mode = kn::WeightsMode::all;
    }

    static Shape shape() {
        Shape s;
        s.batch = 2;
        s.heads = 2;
        s.len_q = s.len_k = 5;
        s.dim_k = 4;
        s.dim_v = 3;
        return s;
    }

    // Nothing written: guards intact and every body element still poisoned.
    void expect_untouched() const {
        EXPECT_TRUE(out_.guards_intact() && lse_.guards_intact() && weights_.guards_intact());
        std::size_t written = 0;
        for (std::size_t i = 0; i < out_.size(); ++i) written += out_.poisoned(i) ? 0 : 1;
        for (std::size_t i = 0; i < lse_.size(); ++i) written += lse_.poisoned(i) ? 0 : 1;
        for (std::size_t i = 0; i < weights_.size(); ++i) written += weights_.poisoned(i) ? 0 : 1;
        EXPECT_EQ(written, 0u) << "outputs written by a call that was refused";
    }

    std::vector<std::int32_t>& lengths() { return lengths_; }

    kn::AttentionParams params;

private:
    Problem problem_;
    GuardedBuffer<float> out_, lse_, weights_;
    std::vector<std::int32_t> lengths_;
};

// 64-byte aligned scratch of `bytes` (at least one line, so the pointer is never null).
struct AlignedScratch {
    explicit AlignedScratch(std::size_t bytes) : data(std::aligned_alloc(64, (bytes + 64) / 64 * 64)) {}
    ~AlignedScratch() { std::free(data); }
    AlignedScratch(const AlignedScratch&) = delete;
    AlignedScratch& operator=(const AlignedScratch&) = delete;
    void* data;
};

struct BadCase {
    const char* name;
    void (*mutate)(kn::AttentionParams&, std::vector<std::int32_t>& lengths);
    const char* named;  // the message must contain this
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

const BadCase kBadCases[] = {
    {"negative_batch", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.batch = -1; }, "batch"},
    {"zero_heads", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.heads = 0; }, "heads"},
    {"zero_len_q", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.len_q = 0; }, "len_q"},
    {"zero_len_k", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.len_k = 0; }, "len_k"},
    {"zero_dim_k", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.dim_k = 0; }, "dim_k"},
    {"zero_dim_v", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.dim_v = 0; }, "dim_v"},
    {"null_q", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.q = nullptr; }, "null"},
    {"null_k", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.k = nullptr; }, "null"},
    {"null_v", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.v = nullptr; }, "null"},
    {"null_out", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.out = nullptr; }, "null"},
    {"null_weights", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.weights = nullptr; }, "weights"},
    {"kv_heads_not_dividing", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.kv_heads = p.heads + 1; }, "kv_heads"},
    {"negative_kv_heads", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.kv_heads = -1; }, "kv_heads"},
    {"negative_q_offset", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.q_offset = -1; }, "q_offset"},
    {"length_above_L", [](kn::AttentionParams&, std::vector<std::int32_t>& n) { n[1] = 6; }, "lengths[1]"},
    {"negative_length", [](kn::AttentionParams&, std::vector<std::int32_t>& n) { n[1] = -1; }, "lengths[1]"},
    {"q_rows_overlap", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.q_strides.row = 3; }, "q strides"},
    {"k_rows_overlap", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.k_strides.row = 3; }, "k strides"},
    {"v_rows_overlap", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.v_strides.row = 2; }, "v strides"},
    {"out_rows_overlap", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.out_strides.row = 2; }, "out strides"},
    {"negative_head_stride", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.q_strides.head = -20; }, "q strides"},
    {"zero_scale", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.scale = 0.0f; }, "scale"},
    {"negative_scale", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.scale = -0.5f; }, "scale"},
    {"nan_scale", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.scale = std::nanf(""); }, "scale"},
    {"infinite_scale", [](kn::AttentionParams& p, std::vector<std::int32_t>&) { p.scale = HUGE_VALF; }, "scale"},
};

class Preconditions : public ::testing::TestWithParam<BadCase> {};

// Every variant of the build, whether this CPU runs it or not: the parameters are checked before
// a backend is chosen, so the refusal is the same everywhere.
TEST_P(Preconditions, RefusedWithANamedReasonAndNothingWritten) {
    const BadCase& c = GetParam();
    for (const Variant& variant : all_variants()) {
        SCOPED_TRACE(variant.name);
        Bound bound;
        c.mutate(bound.params, bound.lengths());
        const std::string message = kn::check_attention_params(bound.params);
        ASSERT_FALSE(message.empty()) << c.name << " was accepted";
        EXPECT_NE(message.find(c.named), std::string::npos) << "message does not name " << c.named << ": " << message;
        // The workspace is sized generously: the parameters, not the scratch, are at fault.
        const kn::KernelOptions options = options_for(variant, 1);
        const std::size_t bytes = std::size_t{1} << 20;
        AlignedScratch scratch(bytes);
        try {
            kn::attention_forward(bound.params, options, scratch.data, bytes);
            ADD_FAILURE() << "attention_forward did not throw for " << c.name;
        } catch (const std::invalid_argument& e) {
            EXPECT_EQ(std::string(e.what()), message);
        }
        bound.expect_untouched();
    }
}

std::string bad_case_name(const ::testing::TestParamInfo<BadCase>& param_info) { return param_info.param.name; }

INSTANTIATE_TEST_SUITE_P(Kernels, Preconditions, ::testing::ValuesIn(kBadCases), bad_case_name);

// The checks of one variant's workspace and dispatch, each variant its own test (skipped, with
// the reason, where it cannot run).
class PreconditionsOfVariant : public VariantTest {};

// Positive control for the cases above: the unmutated problem is accepted and runs.
TEST_P(PreconditionsOfVariant, ValidParametersAreAccepted) {
    const Variant& variant = GetParam();
    Bound bound;
    EXPECT_EQ(kn::check_attention_params(bound.params), "");
    const kn::KernelOptions options = options_for(variant, 1);
    const std::size_t bytes = kn::attention_workspace_bytes(bound.params, options);
    AlignedScratch scratch(bytes);
    EXPECT_NO_THROW(kn::attention_forward(bound.params, options, scratch.data, bytes));
}

// An empty batch is valid even with no buffers at all, and writes nothing.
TEST_P(PreconditionsOfVariant, EmptyBatchNeedsNoBuffers) {
    kn::AttentionParams p;
    p.heads = 1;
    p.len_q = p.len_k = 4;
    p.dim_k = p.dim_v = 2;
    p.q_strides = p.k_strides = p.v_strides = p.out_strides = {8, 8, 2};
    p.scale = 1.0f;
    EXPECT_EQ(kn::check_attention_params(p), "");
    const Variant& variant = GetParam();
    const kn::KernelOptions options = options_for(variant, 1);
    const std::size_t bytes = kn::attention_workspace_bytes(p, options);
    AlignedScratch scratch(bytes);
    EXPECT_NO_THROW(kn::attention_forward(p, options, scratch.data, bytes)) << variant.name;
}

TEST_P(PreconditionsOfVariant, TooSmallOrNullWorkspaceIsRefused) {
    const Variant& variant = GetParam();
    Bound bound;
    const kn::KernelOptions options = options_for(variant, 2);
    const std::size_t needed = kn::attention_workspace_bytes(bound.params, options);
    ASSERT_GT(needed, 0u);
    AlignedScratch scratch(needed);
    EXPECT_THROW(kn::attention_forward(bound.params, options, scratch.data, needed - 1), std::invalid_argument);
    EXPECT_THROW(kn::attention_forward(bound.params, options, nullptr, needed), std::invalid_argument);
    try {
        kn::attention_forward(bound.params, options, scratch.data, needed / 2);
        ADD_FAILURE() << "half the workspace was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("workspace"), std::string::npos) << e.what();
    }
    bound.expect_untouched();
}

// Callers size the workspace before their weights buffer exists: the size follows the weights
// mode, and a workspace of exactly that size serves the call with the buffer bound.
TEST_P(PreconditionsOfVariant, WorkspaceSizedByTheWeightsModeNotThePointer) {
    const Variant& variant = GetParam();
    for (kn::WeightsMode mode : {kn::WeightsMode::all, kn::WeightsMode::mean_over_heads}) {
        SCOPED_TRACE(variant.name + (mode == kn::WeightsMode::all ? " all" : " mean"));
        Bound bound;
        bound.params.weights_mode = mode;
        const kn::KernelOptions options = options_for(variant, 2);
        const std::size_t with_buffer = kn::attention_workspace_bytes(bound.params, options);
        void* const weights = bound.params.weights;
        bound.params.weights = nullptr;
        const std::size_t before_buffer = kn::attention_workspace_bytes(bound.params, options);
        EXPECT_EQ(before_buffer, with_buffer);
        bound.params.weights = weights;
        AlignedScratch scratch(before_buffer);
        EXPECT_NO_THROW(kn::attention_forward(bound.params, options, scratch.data, before_buffer));
    }
}

INSTANTIATE_TEST_SUITE_P(Kernels, PreconditionsOfVariant, ::testing::ValuesIn(all_variants()), variant_test_name);

// Asking for an instruction set this CPU lacks is an error, not a silent fallback (on a CPU that
// runs every backend of the build there is nothing to ask).
TEST(PreconditionsIsa, BackendTheCpuLacksIsRefused) {
    for (kn::Isa isa : kn::built_isas()) {
        if (kn::isa_available(isa)) continue;
        SCOPED_TRACE(kn::isa_name(isa));
        Bound bound;
        kn::KernelOptions options;
        options.isa = isa;
        AlignedScratch scratch(std::size_t{1} << 20);
        EXPECT_THROW(kn::attention_workspace_bytes(bound.params, options), std::invalid_argument);
        EXPECT_THROW(kn::attention_forward(bound.params, options, scratch.data, std::size_t{1} << 20), std::invalid_argument);
        EXPECT_THROW(kn::projection_packed_floats(4, 4, isa), std::invalid_argument);
        bound.expect_untouched();
    }
}

}  // namespace
}  // namespace attnbatch::test
