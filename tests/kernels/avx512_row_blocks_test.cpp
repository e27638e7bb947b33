// The avx512 backend runs its fp32 attention on 8-row register tiles on AMD cores and 12-row
// ones on Intel cores (isa.hpp, avx512_row_block), and promises the same bits either way: the
// accuracy, mask and weights tests check whichever this CPU picks against the fp64 reference,
// and this one holds the other to it bit for bit, on the shapes where the two split their work
// differently: rows past the last whole block, causal diagonals, several key tiles, values
// repacked (d_v not a multiple of the tile), every weights mode.
#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnbatch/kernels/isa.hpp"
#include "support/kernel_test_support.hpp"

namespace attnbatch::test {
namespace {

struct Case {
    const char* name;
    Shape shape;
};

std::vector<Case> cases() {
    std::vector<Case> all;
    Shape causal;  // ragged lengths, L not a multiple of 8 or 12, the CLI's layout
    causal.batch = 3;
    causal.heads = 5;
    causal.len_q = causal.len_k = 300;
    causal.dim_k = causal.dim_v = 64;
    causal.lengths = {300, 257, 1};
    causal.causal = true;
    causal.layout = Layout::heads_packed;
    all.push_back({"causal_ragged", causal});
    Shape tails;  // two key tiles, d_v = 48 (values repacked), strided rows with NaN gaps
    tails.batch = 2;
    tails.heads = 2;
    tails.len_q = tails.len_k = 517;
    tails.dim_k = 64;
    tails.dim_v = 48;
    tails.lengths = {517, 100};
    tails.layout = Layout::padded;
    all.push_back({"full_tails_padded", tails});
    Shape cross;  // few queries against many keys
    cross.batch = 2;
    cross.heads = 3;
    cross.len_q = 37;
    cross.len_k = 700;
    cross.dim_k = cross.dim_v = 32;
    all.push_back({"cross_few_queries", cross});
    Shape large = causal;  // logits of order 1e4: every rescale of the online softmax taken
    large.fill = Fill::large_logits;
    all.push_back({"causal_large_logits", large});
    return all;
}

struct Mode {
    const char* name;
    Request request;
};

const Mode kModes[] = {
    {"no_weights", {true, kn::WeightsMode::none, kn::WeightsType::f32}},
    {"all_f32", {true, kn::WeightsMode::all, kn::WeightsType::f32}},
    {"all_f16", {true, kn::WeightsMode::all, kn::WeightsType::f16}},
    {"mean_f32", {true, kn::WeightsMode::mean_over_heads, kn::WeightsType::f32}},
};

// Puts the CPU's own choice back whatever the test does.
struct RowBlockScope {
    ~RowBlockScope() { kn::set_avx512_row_block(0); }
};

std::optional<kn::Isa> avx512_isa() {
    const std::optional<kn::Isa> isa = kn::find_isa("avx512");
    if (!isa || !kn::isa_available(*isa)) return std::nullopt;
    return isa;
}

TEST(Avx512RowBlocks, EightAndTwelveRowsGiveTheSameBits) {
    const std::optional<kn::Isa> isa = avx512_isa();
    if (!isa) GTEST_SKIP() << "this build or CPU has no AVX-512 backend";
    RowBlockScope restore;
    kn::KernelOptions options;
    options.kind = kn::KernelKind::blocked;
    options.isa = *isa;
    options.threads = 2;
    std::uint32_t seed = 71;
    for (const Case& c : cases()) {
        const Problem problem = make_problem(c.shape, seed++);
        for (const Mode& mode : kModes) {
            SCOPED_TRACE(std::string(c.name) + " " + mode.name);
            kn::set_avx512_row_block(8);
            const Outputs eight = run_kernel(problem, options, mode.request);
            kn::set_avx512_row_block(12);
            const Outputs twelve = run_kernel(problem, options, mode.request);
            EXPECT_EQ(count_nans(eight.out) + count_nans(eight.lse), 0u);
            EXPECT_TRUE(bit_identical(eight.out, twelve.out)) << "out";
            EXPECT_TRUE(bit_identical(eight.lse, twelve.lse)) << "lse";
            EXPECT_TRUE(bit_identical(eight.weights, twelve.weights)) << "weights";
            EXPECT_TRUE(bit_identical(eight.weights_f16, twelve.weights_f16)) << "f16 weights bits";
        }
    }
}

TEST(Avx512RowBlocks, IntelCoresTakeTwelveRowsOthersEight) {
#if defined(__x86_64__) || defined(__i386__)
    EXPECT_EQ(kn::avx512_row_block(), __builtin_cpu_is("intel") ? 12 : 8);
#else
    EXPECT_EQ(kn::avx512_row_block(), 8);
#endif
    RowBlockScope restore;
    kn::set_avx512_row_block(12);
    EXPECT_EQ(kn::avx512_row_block(), 12);
    kn::set_avx512_row_block(0);
    EXPECT_TRUE(kn::avx512_row_block() == 8 || kn::avx512_row_block() == 12);
    EXPECT_THROW(kn::set_avx512_row_block(16), std::invalid_argument);
}

// What reports and bench show: the avx512 fp32 kernel's row block, 0 for backends whose build
// fixes it.
TEST(Avx512RowBlocks, OnlyTheAvx512KernelReportsARowBlock) {
    kn::KernelOptions options;
    options.kind = kn::KernelKind::blocked;
    options.isa = kn::Isa::portable;
    EXPECT_EQ(kn::row_block(options), 0);
    options.kind = kn::KernelKind::reference;
    EXPECT_EQ(kn::row_block(options), 0);
    const std::optional<kn::Isa> isa = avx512_isa();
    if (!isa) GTEST_SKIP() << "this build or CPU has no AVX-512 backend";
    RowBlockScope restore;
    options.kind = kn::KernelKind::blocked;
    options.isa = *isa;
    kn::set_avx512_row_block(12);
    EXPECT_EQ(kn::row_block(options), 12);
    kn::set_avx512_row_block(8);
    EXPECT_EQ(kn::row_block(options), 8);
}

}  // namespace
}  // namespace attnbatch::test
