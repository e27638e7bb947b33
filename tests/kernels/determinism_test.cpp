// docs/formats.md guarantees bit-identical outputs, weights and lse whatever the number of threads.
// The problem has several query and key tiles per head and more tasks than threads, with
// causal masking and ragged lengths so that tasks differ in cost and dynamic scheduling
// hands them out in a different order on every run.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runnable_variants.hpp"
#include "support/kernel_test_support.hpp"

namespace attnbatch::test {
namespace {

class Determinism : public VariantTest {};

Shape determinism_shape(const Variant& variant) {
    Shape s;
    // The fp64 reference kernel is two orders slower: a smaller L still gives it many rows.
    const int len = variant.kind == kn::KernelKind::reference ? 90 : 300;
    s.batch = 3;
    s.heads = 5;
    s.len_q = s.len_k = len;
    s.dim_k = s.dim_v = 64;
    s.lengths = {len, len - 43, 1};
    s.causal = true;
    s.layout = Layout::heads_packed;
    return s;
}

struct Mode {
    const char* name;
    kn::WeightsMode weights;
    kn::WeightsType type;
};

constexpr Mode kModes[] = {
    {"all_f32", kn::WeightsMode::all, kn::WeightsType::f32},
    {"all_f16", kn::WeightsMode::all, kn::WeightsType::f16},
    {"mean_f32", kn::WeightsMode::mean_over_heads, kn::WeightsType::f32},
    {"mean_f16", kn::WeightsMode::mean_over_heads, kn::WeightsType::f16},
};

TEST_P(Determinism, BitIdenticalForOneToFourThreads) {
    const Shape s = determinism_shape(GetParam());
    SCOPED_TRACE(s.describe());
    const Problem problem = make_problem(s, 31);
    for (const Mode& mode : kModes) {
        const Request request{true, mode.weights, mode.type};
        const Outputs one = run_kernel(problem, options_for(GetParam(), 1), request);
        EXPECT_EQ(count_nans(one.out) + count_nans(one.lse) + count_nans(one.weights), 0u) << mode.name;
        for (int threads = 2; threads <= 4; ++threads) {
            SCOPED_TRACE(std::string(mode.name) + " threads=" + std::to_string(threads));
            const Outputs many = run_kernel(problem, options_for(GetParam(), threads), request);
            EXPECT_TRUE(bit_identical(one.out, many.out)) << "out";
            EXPECT_TRUE(bit_identical(one.lse, many.lse)) << "lse";
            EXPECT_TRUE(bit_identical(one.weights, many.weights)) << "weights";
            EXPECT_TRUE(bit_identical(one.weights_f16, many.weights_f16)) << "f16 weights bits";
        }
    }
}

// What else is requested (lse, weights, their mode) must not change a bit of out: a run that
// stores weights and one that does not give the same /output.
TEST_P(Determinism, OutputDoesNotDependOnSideOutputs) {
    const Shape s = determinism_shape(GetParam());
    SCOPED_TRACE(s.describe());
    const Problem problem = make_problem(s, 32);
    const Outputs plain = run_kernel(problem, options_for(GetParam(), 2), {false, kn::WeightsMode::none, kn::WeightsType::f32});
    const Outputs with_lse = run_kernel(problem, options_for(GetParam(), 2), {true, kn::WeightsMode::none, kn::WeightsType::f32});
    EXPECT_TRUE(bit_identical(plain.out, with_lse.out));
    for (const Mode& mode : kModes) {
        SCOPED_TRACE(mode.name);
        const Outputs o = run_kernel(problem, options_for(GetParam(), 2), {true, mode.weights, mode.type});
        EXPECT_TRUE(bit_identical(plain.out, o.out)) << "out";
        EXPECT_TRUE(bit_identical(with_lse.lse, o.lse)) << "lse";
    }
}

INSTANTIATE_TEST_SUITE_P(Kernels, Determinism, ::testing::ValuesIn(all_variants()), variant_test_name);

}  // namespace
}  // namespace attnbatch::test
