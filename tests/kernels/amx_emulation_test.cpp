// The bf16 backend's AMX tile path on CPUs without AMX: bf16_products.hpp compiled here with
// ATTNBATCH_AMX_EMULATION, whose tile instructions are the plain C++ model of
// src/kernels/amx_emulation.hpp (the SDM's pseudocode). It checks what can go wrong in that path
// short of the instructions themselves: the tile configuration, the packed layouts, strides and
// loops of both products, the alpha rescale before P V, masks, weights, row slices and threads.
// Where the CPU has AMX, the kernel tests run the real instructions too (variant *_amx), and
// AgreesWithTheRealTiles compares the model with the hardware.
#define ATTNBATCH_AMX_EMULATION 1
#define ATTNBATCH_ISA_NAMESPACE isa_amx_emulated
#define ATTNBATCH_VECTOR_BYTES 64
#define ATTNBATCH_MR 16
#define ATTNBATCH_NV 2
#define ATTNBATCH_NV_PV 1
#include "bf16_products.hpp"
#include "blocked_attention.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "runnable_variants.hpp"
#include "support/kernel_test_support.hpp"

namespace attnbatch::test {
namespace {

namespace emulated = kn::isa_amx_emulated;

bool cpu_runs_packing() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16"); }

// One call of the emulated tile path on a contiguous problem: out, lse and weights (all, f32).
Outputs run_tiles(const Problem& problem, int threads, int block_q = 0, int block_k = 0,
                  kn::WeightsMode mode = kn::WeightsMode::all) {
    const Shape& s = problem.shape;
    kn::AttentionParams p = problem.params();
    Outputs o;
    o.out.assign(static_cast<std::size_t>(s.batch) * s.heads * s.len_q * s.dim_v, -7.0f);
    o.lse.assign(static_cast<std::size_t>(s.batch) * s.heads * s.len_q, -7.0f);
    const int weight_heads = mode == kn::WeightsMode::mean_over_heads ? 1 : s.heads;
    o.weights.assign(static_cast<std::size_t>(s.batch) * weight_heads * s.len_q * s.len_k, -7.0f);
    p.out = o.out.data();
    p.lse = o.lse.data();
    p.weights = o.weights.data();
    p.weights_mode = mode;
    const int bq = block_q > 0 ? block_q : 128, bk = block_k > 0 ? block_k : 256;
    std::vector<unsigned char> workspace(emulated::workspace_bytes(p, bq, bk, threads));
    emulated::forward(p, bq, bk, threads, /*amx_permitted=*/true, workspace.data());
    return o;
}

Shape shape_of(int len, int dim_k, int dim_v, bool causal, std::vector<std::int32_t> lengths, int heads = 2) {
    Shape s;
    s.lengths = std::move(lengths);
    s.batch = static_cast<int>(s.lengths.size());
    s.heads = heads;
    s.len_q = s.len_k = len;
    s.dim_k = dim_k;
    s.dim_v = dim_v;
    s.causal = causal;
    return s;
}

class AmxEmulation : public ::testing::Test {
protected:
    void SetUp() override {
        if (!cpu_runs_packing()) GTEST_SKIP() << "the bf16 packing needs AVX512-BF16, which this CPU lacks";
    }
};

// The flash-attention rule against fp64 with the plain bf16 implementation as the yardstick:
// depths and value widths below, at and past the tile sizes (32 depths, 16 columns), key counts
// across panel and key-tile edges, ragged and empty sequences.
TEST_F(AmxEmulation, MatchesFp64WithinTheBf16Rule) {
    struct Case {
        int len, dim_k, dim_v;
        bool causal;
    };
    for (const Case& c : {Case{65, 64, 64, false}, Case{65, 64, 80, true}, Case{129, 3, 17, false}, Case{129, 80, 40, true},
                          Case{300, 33, 64, true}, Case{7, 128, 96, false}}) {
        const Shape s = shape_of(c.len, c.dim_k, c.dim_v, c.causal, {c.len, 0, 1, std::max(1, 2 * c.len / 3)});
        SCOPED_TRACE(s.describe());
        const Problem problem = make_problem(s, 1234u + static_cast<unsigned>(c.len * 7 + c.dim_k));
        const Reference64 ref = reference_f64(problem, true, false);
        const Naive32 naive = naive_bf16(problem);
        const Outputs got = run_tiles(problem, 2, 0, c.len > 200 ? 128 : 0);
        expect_close_to_reference("out", got.out, naive.out, ref.out);
        expect_close_to_reference("lse", got.lse, naive.lse, ref.lse);
        expect_close_to_reference("weights", got.weights, naive.weights, ref.weights);
    }
}

// The tile path's error against the floor of bf16 rounding (see bf16_floor_test.cpp): within
// 1.2x of the NMSE that rounding Q, K, V and P to bf16 alone gives, over two key tiles.
TEST_F(AmxEmulation, NmseWithinAFifthOfTheRoundingFloor) {
    const Shape s = shape_of(600, 64, 64, true, {600, 1, 400});
    const Problem problem = make_problem(s, 31);
    const Reference64 ref = reference_f64(problem, false, false);
    std::vector<double> floor_out(ref.out.size());
    kn::ReferenceOutputs o;
    o.out = floor_out.data();
    kn::bf16_operands_attention_f64(problem.params(), o);
    const Outputs tiles = run_tiles(problem, 2, 128, 512);  // the backend's default tiles
    const ErrorStats kernel = error_stats(tiles.out, ref.out);
    double floor_err = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < ref.out.size(); ++i) {
        floor_err += (floor_out[i] - ref.out[i]) * (floor_out[i] - ref.out[i]);
        norm += ref.out[i] * ref.out[i];
    }
    const double floor = floor_err / norm;
    EXPECT_GT(floor, 1e-7);
    EXPECT_LE(kernel.nmse(), 1.2 * floor) << "NMSE " << kernel.nmse() << " against a floor of " << floor;
}

// The tile path and the AVX512-BF16 path compute the same products in another order inside a
// pair: close to each other (a few bf16-rounded P entries may flip), not necessarily the bits.
TEST_F(AmxEmulation, AgreesWithTheDotProductPath) {
    const Shape s = shape_of(150, 64, 64, true, {150, 97, 0});
    const Problem problem = make_problem(s, 77);
    const Outputs tiles = run_tiles(problem, 1);
    kn::KernelOptions options;
    options.precision = kn::Precision::bf16;
    options.threads = 1;
    const Outputs dots = run_kernel(problem, options, {true, kn::WeightsMode::all, kn::WeightsType::f32});
    const Reference64 ref = reference_f64(problem, false, false);
    const ErrorStats between = error_stats(tiles.out, std::vector<double>(dots.out.begin(), dots.out.end()));
    const ErrorStats to_ref = error_stats(dots.out, ref.out);
    EXPECT_LE(between.max_abs, to_ref.max_abs) << "the two paths differ by more than either is off the reference";
}

// Masked rows and keys are exact zeros (-inf lse) on the tile path too, and the head mean runs.
TEST_F(AmxEmulation, MasksAndHeadMean) {
    const Shape s = shape_of(70, 24, 40, true, {70, 0, 1, 33});
    const Problem problem = make_problem(s, 5);
    const Outputs o = run_tiles(problem, 2);
    for (int b = 0; b < s.batch; ++b)
        for (int h = 0; h < s.heads; ++h)
            for (int i = 0; i < s.len_q; ++i) {
                const std::size_t row = (static_cast<std::size_t>(b) * s.heads + h) * s.len_q + i;
                const bool valid = i < s.lengths[static_cast<std::size_t>(b)];
                if (!valid) {
                    EXPECT_EQ(o.lse[row], -std::numeric_limits<float>::infinity());
                    for (int c = 0; c < s.dim_v; ++c) ASSERT_EQ(o.out[row * s.dim_v + c], 0.0f) << row;
                }
                for (int j = 0; j < s.len_k; ++j) {
                    const float w = o.weights[row * s.len_k + j];
                    if (!valid || j > i || j >= s.lengths[static_cast<std::size_t>(b)]) {
                        ASSERT_EQ(w, 0.0f) << row << "," << j;
                    }
                }
            }
    const Reference64 ref = reference_f64(problem, false, true);
    const Naive32 naive = naive_bf16(problem);
    const Outputs mean = run_tiles(problem, 2, 0, 0, kn::WeightsMode::mean_over_heads);
    expect_close_to_reference("mean weights", mean.weights, naive.weights_mean, ref.weights_mean);
}

// Bits do not depend on the thread count or the tile sizes' split of the rows among tasks
// (rows are computed apart from each other on tiles as everywhere).
TEST_F(AmxEmulation, BitIdenticalForAnyThreadCount) {
    const Shape s = shape_of(200, 64, 48, true, {200, 150, 61});
    const Problem problem = make_problem(s, 9);
    const Outputs one = run_tiles(problem, 1);
    for (int threads : {2, 3}) {
        const Outputs many = run_tiles(problem, threads);
        EXPECT_TRUE(bit_identical(one.out, many.out)) << threads << " threads";
        EXPECT_TRUE(bit_identical(one.lse, many.lse)) << threads << " threads";
        EXPECT_TRUE(bit_identical(one.weights, many.weights)) << threads << " threads";
    }
    const Outputs other_tiles = run_tiles(problem, 2, 48, 256);
    EXPECT_TRUE(bit_identical(one.out, other_tiles.out)) << "block_q changes which rows share a task, not their bits";
}

// On a CPU with AMX (and the OS's consent), the model against the real instructions. They do
// not give the same bits: of the sums of one TDPBF16PS on an Intel Xeon (model 207), 70% came
// out as the model's pairs of fused multiply-adds make them, and no simple order or rounding
// matched all (the products summed exactly and rounded once before the add: 89%). What the
// model stands for, then, is the tile path's structure, and its numbers within the rule: the
// two differ by no more than the real tiles are off the fp64 reference.
TEST_F(AmxEmulation, AgreesWithTheRealTiles) {
    const auto variants = bf16_variants();
    const auto amx = std::find_if(variants.begin(), variants.end(), [](const Variant& v) { return v.amx; });
    ASSERT_NE(amx, variants.end()) << "the build has no bf16 tile variant";
    const std::string why = why_unavailable(*amx);
    if (!why.empty()) GTEST_SKIP() << "nothing to compare with: " << why;
    const Shape s = shape_of(300, 64, 48, true, {300, 211, 0, 37});
    const Problem problem = make_problem(s, 21);
    const Reference64 ref = reference_f64(problem, false, false);
    for (int block_k : {256, 512}) {
        SCOPED_TRACE("block_k " + std::to_string(block_k));
        const Outputs model = run_tiles(problem, 2, 128, block_k);
        kn::KernelOptions options = options_for(*amx, 2);
        options.block_q = 128;
        options.block_k = block_k;
        const Outputs real = run_kernel(problem, options, {true, kn::WeightsMode::all, kn::WeightsType::f32});
        const ErrorStats between = error_stats(model.out, std::vector<double>(real.out.begin(), real.out.end()));
        const ErrorStats to_ref = error_stats(real.out, ref.out);
        EXPECT_GT(to_ref.max_abs, 0.0);
        EXPECT_LE(between.max_abs, to_ref.max_abs) << "the model and the tiles differ by more than the tiles are off";
    }
}

}  // namespace
}  // namespace attnbatch::test
