// Each bf16 kernel variant on the accuracy grid of accuracy_cases.hpp against the fp64
// reference, the tolerance derived from the plain bf16 implementation of the same problem (the
// flash-attention rule of expect_close_to_reference): one test per variant and group of cases.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "accuracy_cases.hpp"
#include "runnable_variants.hpp"

namespace attnbatch::test {
namespace {

struct CaseGroup {
    const char* name;
    std::vector<AccuracyCase> (*cases)();
};

constexpr CaseGroup kGroups[] = {
    {"Grid", grid_cases}, {"Long", long_cases}, {"Extreme", extreme_cases}, {"Cross", cross_cases}};

void PrintTo(const CaseGroup& group, std::ostream* os) { *os << group.name; }

class Bf16Accuracy : public ::testing::TestWithParam<std::tuple<Variant, CaseGroup>> {
protected:
    void SetUp() override {
        const std::string why = why_unavailable(std::get<0>(GetParam()));
        if (!why.empty()) GTEST_SKIP() << std::get<0>(GetParam()).name << ": " << why;
    }
};

TEST_P(Bf16Accuracy, MatchesFp64WithinTheBf16Rule) {
    const Variant& variant = std::get<0>(GetParam());
    for (const AccuracyCase& c : std::get<1>(GetParam()).cases()) {
        SCOPED_TRACE(c.name + ": " + c.shape.describe());
        const Problem problem = make_problem(c.shape, c.seed);
        const Reference64 ref = reference_f64(problem, true, false);
        const Naive32 naive = naive_bf16(problem);
        const Outputs got = run_kernel(problem, options_for(variant), {true, kn::WeightsMode::all, kn::WeightsType::f32});
        expect_close_to_reference("out", got.out, naive.out, ref.out);
        expect_close_to_reference("lse", got.lse, naive.lse, ref.lse);
        expect_close_to_reference("weights", got.weights, naive.weights, ref.weights);
    }
}

std::string run_name(const ::testing::TestParamInfo<std::tuple<Variant, CaseGroup>>& info) {
    return std::string(std::get<1>(info.param).name) + "_" + std::get<0>(info.param).name;
}

INSTANTIATE_TEST_SUITE_P(Kernels, Bf16Accuracy,
                         ::testing::Combine(::testing::ValuesIn(bf16_variants()), ::testing::ValuesIn(kGroups)), run_name);

}  // namespace
}  // namespace attnbatch::test
