// block_q / block_k other than the tuned defaults: sizes that are not multiples of the
// micro-tile (rounded up inside), a single row, and tiles larger than the sequence. Each must
// stay within the derived tolerance and within the workspace it asked for.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runnable_variants.hpp"
#include "support/kernel_test_support.hpp"

namespace attnbatch::test {
namespace {

class Tiles : public VariantTest {};

constexpr int kBlocks[] = {1, 7, 16, 64, 200};

TEST_P(Tiles, AnyTileSizeStaysWithinTolerance) {
    for (bool causal : {false, true}) {
        Shape s;
        s.lengths = {150, 0, 97};
        s.batch = 3;
        s.heads = 2;
        s.len_q = s.len_k = 150;
        s.dim_k = 40;
        s.dim_v = 24;
        s.causal = causal;
        s.layout = Layout::padded;
        SCOPED_TRACE(s.describe());
        const Problem problem = make_problem(s, 41);
        const Reference64 ref = reference_f64(problem, true, true);
        const Naive32 naive = naive_for(problem, GetParam());
        for (int block_q : kBlocks) {
            for (int block_k : kBlocks) {
                SCOPED_TRACE("block_q=" + std::to_string(block_q) + " block_k=" + std::to_string(block_k));
                kn::KernelOptions options = options_for(GetParam());
                options.block_q = block_q;
                options.block_k = block_k;
                const Outputs all = run_kernel(problem, options, {true, kn::WeightsMode::all, kn::WeightsType::f32});
                expect_close_to_reference("out", all.out, naive.out, ref.out);
                expect_close_to_reference("lse", all.lse, naive.lse, ref.lse);
                expect_close_to_reference("weights", all.weights, naive.weights, ref.weights);
                // The head mean runs a different task loop over the same tiles.
                const Outputs mean = run_kernel(problem, options, {false, kn::WeightsMode::mean_over_heads, kn::WeightsType::f32});
                expect_close_to_reference("mean weights", mean.weights, naive.weights_mean, ref.weights_mean);
            }
        }
    }
}

// The reference kernel has no tiles; it must accept the options and ignore them.
INSTANTIATE_TEST_SUITE_P(Kernels, Tiles, ::testing::ValuesIn(all_variants()), variant_test_name);

}  // namespace
}  // namespace attnbatch::test
