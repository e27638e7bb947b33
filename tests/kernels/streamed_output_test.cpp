// Output rows on vector bounds are streamed past the caches (non-temporal stores); rows off them
// are stored as before. Both ways must write the same bits: the same call into an output on a
// 64-byte bound and into one a float off it, on every backend, full and causal, with and
// without weights, on two threads (each fences its own streamed rows).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runnable_variants.hpp"
#include "support/kernel_test_support.hpp"

namespace attnbatch::test {
namespace {

// `elements` floats in `storage`, starting `offset` floats past a 64-byte bound.
float* place(std::vector<float>& storage, std::size_t elements, std::size_t offset) {
    storage.assign(elements + 16 + offset, 0.0f);
    const std::size_t past = reinterpret_cast<std::uintptr_t>(storage.data()) % 64;
    return storage.data() + (past ? (64 - past) / sizeof(float) : 0) + offset;
}

class StreamedOutput : public VariantTest {};

TEST_P(StreamedOutput, RowsOnAndOffVectorBoundsGetTheSameBits) {
    // d_v = 64: whole vectors for every backend's width; rows 256 bytes apart keep each row on
    // the bound the output starts on.
    const int batch = 2, heads = 3, len = GetParam().kind == kn::KernelKind::reference ? 40 : 150, dim = 64;
    const std::size_t elements = static_cast<std::size_t>(batch) * heads * len * dim;
    std::mt19937 rng(17);
    std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
    std::vector<float> q(elements), k(elements), v(elements);
    for (auto* x : {&q, &k, &v}) {
        for (float& value : *x) value = uniform(rng);
    }
    const std::vector<std::int32_t> lengths = {len, len * 2 / 3};
    std::vector<float> storage[2];
    float* const outputs[2] = {place(storage[0], elements, 0), place(storage[1], elements, 1)};
    for (const bool causal : {false, true}) {
        for (const kn::WeightsMode mode : {kn::WeightsMode::none, kn::WeightsMode::all}) {
            SCOPED_TRACE("causal=" + std::to_string(causal) + " mode=" + std::to_string(static_cast<int>(mode)));
            std::vector<float> results[2], weights[2];
            for (int side = 0; side < 2; ++side) {
                kn::AttentionParams p;
                p.batch = batch;
                p.heads = p.kv_heads = heads;
                p.len_q = p.len_k = len;
                p.dim_k = p.dim_v = dim;
                p.scale = 0.125f;
                p.causal = causal;
                p.lengths = lengths.data();
                const kn::TensorStrides strides{static_cast<std::ptrdiff_t>(heads) * len * dim,
                                                static_cast<std::ptrdiff_t>(len) * dim, dim};
                p.q = q.data();
                p.k = k.data();
                p.v = v.data();
                p.q_strides = p.k_strides = p.v_strides = p.out_strides = strides;
                std::fill(outputs[side], outputs[side] + elements, -7.0f);
                p.out = outputs[side];
                std::vector<float> lse(static_cast<std::size_t>(batch) * heads * len);
                p.lse = lse.data();
                if (mode != kn::WeightsMode::none) {
                    weights[side].assign(static_cast<std::size_t>(batch) * heads * len * len, -7.0f);
                    p.weights = weights[side].data();
                    p.weights_mode = mode;
                }
                const kn::KernelOptions options = options_for(GetParam(), 2);
                std::vector<unsigned char> workspace(kn::attention_workspace_bytes(p, options));
                kn::attention_forward(p, options, workspace.data(), workspace.size());
                results[side].assign(outputs[side], outputs[side] + elements);
                results[side].insert(results[side].end(), lse.begin(), lse.end());
            }
            EXPECT_TRUE(bit_identical(results[0], results[1])) << "output and lse";
            EXPECT_TRUE(bit_identical(weights[0], weights[1])) << "weights";
            // Every row was written: none kept the fill.
            for (const float x : results[0]) ASSERT_NE(x, -7.0f);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Kernels, StreamedOutput, ::testing::ValuesIn(all_variants()), variant_test_name);

}  // namespace
}  // namespace attnbatch::test
