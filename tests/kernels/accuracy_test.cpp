// The fp32 kernel variants and the reference kernel against the fp64 reference, with the
// tolerance derived from a naive fp32 implementation of the same problem (see
// expect_close_to_reference). The bf16 variants run the same grid in bf16_accuracy_test.cpp,
// one test per variant, so that a CPU without them reports those tests skipped.
#include <gtest/gtest.h>

#include <string>

#include "accuracy_cases.hpp"

namespace attnbatch::test {
namespace {

class Accuracy : public ::testing::TestWithParam<AccuracyCase> {};

TEST_P(Accuracy, EveryVariantMatchesFp64WithinDerivedTolerance) {
    const AccuracyCase& c = GetParam();
    SCOPED_TRACE(c.shape.describe());
    const Problem problem = make_problem(c.shape, c.seed);
    const Reference64 ref = reference_f64(problem, true, false);
    const Naive32 naive = naive_f32(problem);
    for (const Variant& variant : available_variants()) {
        if (variant.precision == kn::Precision::bf16) continue;
        SCOPED_TRACE(variant.name);
        const Outputs got = run_kernel(problem, options_for(variant), {true, kn::WeightsMode::all, kn::WeightsType::f32});
        expect_close_to_reference("out", got.out, naive.out, ref.out);
        expect_close_to_reference("lse", got.lse, naive.lse, ref.lse);
        expect_close_to_reference("weights", got.weights, naive.weights, ref.weights);
    }
}

std::string case_name(const ::testing::TestParamInfo<AccuracyCase>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Grid, Accuracy, ::testing::ValuesIn(grid_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Long, Accuracy, ::testing::ValuesIn(long_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Extreme, Accuracy, ::testing::ValuesIn(extreme_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Cross, Accuracy, ::testing::ValuesIn(cross_cases()), case_name);

}  // namespace
}  // namespace attnbatch::test
