// The bf16 kernel's error against its floor: rounding Q, K, V and P to bfloat16 is all the bf16
// arithmetic must cost. bf16_operands_attention_f64 computes attention in double on exactly
// those rounded operands; its NMSE against reference_attention_f64 is the floor, and each bf16
// variant's NMSE (out) must stay within 1.2x of it: the rest of the kernel's arithmetic (fp32
// accumulation, its 2^x, the online softmax's rescaling) may add a fifth at most.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "runnable_variants.hpp"

namespace attnbatch::test {
namespace {

constexpr double kFloorFactor = 1.2;

struct FloorCase {
    const char* name;
    Shape shape;
};

std::vector<FloorCase> floor_cases() {
    std::vector<FloorCase> cases;
    Shape bench;  // the shape of `attnbatch bench`, two sequences of four heads
    bench.batch = 2;
    bench.heads = 4;
    bench.len_q = bench.len_k = 512;
    bench.dim_k = bench.dim_v = 64;
    cases.push_back({"L512_d64", bench});
    Shape causal;  // rows across two key tiles, ragged lengths, d_v != d_k
    causal.batch = 3;
    causal.heads = 1;
    causal.len_q = causal.len_k = 1000;
    causal.dim_k = 64;
    causal.dim_v = 80;
    causal.causal = true;
    causal.lengths = {1000, 1, 666};
    cases.push_back({"L1000_causal_ragged", causal});
    Shape odd;  // depths and widths off every vector and tile size, the CLI's layout
    odd.batch = 2;
    odd.heads = 3;
    odd.len_q = odd.len_k = 300;
    odd.dim_k = 33;
    odd.dim_v = 17;
    odd.layout = Layout::heads_packed;
    cases.push_back({"L300_dk33_dv17_packed", odd});
    return cases;
}

double nmse(const std::vector<double>& values, const std::vector<double>& ref) {
    double err = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        err += (values[i] - ref[i]) * (values[i] - ref[i]);
        norm += ref[i] * ref[i];
    }
    return err / norm;
}

// The floor's outputs, (B, H, Lq, d_v) as reference_f64 gives them.
std::vector<double> floor_outputs(const Problem& problem) {
    const Shape& s = problem.shape;
    std::vector<double> out(static_cast<std::size_t>(s.batch) * s.heads * s.len_q * s.dim_v);
    kn::ReferenceOutputs o;
    o.out = out.data();
    kn::bf16_operands_attention_f64(problem.params(), o);
    return out;
}

class Bf16Floor : public VariantTest {};

TEST_P(Bf16Floor, NmseWithinAFifthOfTheRoundingFloor) {
    for (const FloorCase& c : floor_cases()) {
        SCOPED_TRACE(std::string(c.name) + ": " + c.shape.describe());
        const Problem problem = make_problem(c.shape, 2024);
        const Reference64 ref = reference_f64(problem, false, false);
        const double floor = nmse(floor_outputs(problem), ref.out);
        const Outputs got = run_kernel(problem, options_for(GetParam()), {false, kn::WeightsMode::none, kn::WeightsType::f32});
        const double kernel = nmse(std::vector<double>(got.out.begin(), got.out.end()), ref.out);
        // The floor itself is what bf16 rounding gives, far above fp32's: a floor near zero would
        // mean that bf16_operands_attention_f64 rounds nothing and the bound says nothing.
        EXPECT_GT(floor, 1e-7);
        EXPECT_LE(kernel, kFloorFactor * floor) << "NMSE " << kernel << " against a floor of " << floor << " ("
                                                << kernel / floor << "x)";
        RecordProperty(std::string(c.name) + "_nmse_over_floor", std::to_string(kernel / floor));
    }
}

INSTANTIATE_TEST_SUITE_P(Kernels, Bf16Floor, ::testing::ValuesIn(bf16_variants()), variant_test_name);

}  // namespace
}  // namespace attnbatch::test
