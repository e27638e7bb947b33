// The plain bf16 implementation of attention.hpp: what a framework's bf16 matrix products with
// fp32 accumulation give, row by row. `verify` measures bf16 runs against its error.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attnbatch/kernels/attention.hpp"
#include "attnbatch/kernels/bf16.hpp"

namespace attnbatch::kernels {

void naive_attention_bf16(const AttentionParams& p, const ReferenceOutputs& o) {
    const std::size_t lq = p.len_q, lk = p.len_k, dv = p.dim_v, heads = p.heads;
    const bool mean = o.weights_mean_over_heads;
    if (o.weights) std::memset(o.weights, 0, sizeof(double) * p.batch * (mean ? 1 : heads) * lq * lk);
    std::vector<float> logits(lk), acc(dv);
    for (int b = 0; b < p.batch; ++b) {
        const int n = p.lengths ? p.lengths[b] : p.len_k;
        for (int h = 0; h < p.heads; ++h) {
            const int kv_h = kv_head_of(p, h);
            const float* kh = p.k + b * p.k_strides.seq + kv_h * p.k_strides.head;
            const float* vh = p.v + b * p.v_strides.seq + kv_h * p.v_strides.head;
            for (int i = 0; i < p.len_q; ++i) {
                const std::size_t row = (static_cast<std::size_t>(b) * heads + h) * lq + i;
                const int position = p.q_offset + i;
                int keys = position < n ? (n < p.len_k ? n : p.len_k) : 0;
                if (p.causal && keys > position + 1) keys = position + 1;
                const float* qi = p.q + b * p.q_strides.seq + h * p.q_strides.head + i * p.q_strides.row;
                float m = -std::numeric_limits<float>::infinity();
                for (int j = 0; j < keys; ++j) {
                    const float* kj = kh + j * p.k_strides.row;
                    float dot = 0.0f;
                    for (int c = 0; c < p.dim_k; ++c) dot += round_to_bf16(qi[c]) * round_to_bf16(kj[c]);
                    logits[j] = dot * p.scale;
                    m = std::fmax(m, logits[j]);
                }
                float sum = 0.0f;
                for (int j = 0; j < keys; ++j) {
                    logits[j] = std::exp(logits[j] - m);
                    sum += logits[j];
                }
                std::fill(acc.begin(), acc.end(), 0.0f);
                for (int j = 0; j < keys; ++j) {
                    const float weight = round_to_bf16(logits[j] / sum);
                    const float* vj = vh + j * p.v_strides.row;
                    for (std::size_t c = 0; c < dv; ++c) acc[c] += weight * round_to_bf16(vj[c]);
                }
                if (o.out) {
                    for (std::size_t c = 0; c < dv; ++c) o.out[row * dv + c] = acc[c];
                }
                if (o.lse) {
                    o.lse[row] = keys ? static_cast<double>(m) + std::log(static_cast<double>(sum))
                                      : -std::numeric_limits<double>::infinity();
                }
                if (o.weights && keys) {
                    const std::size_t wrow = mean ? static_cast<std::size_t>(b) * lq + i : row;
                    const double factor = mean ? 1.0 / static_cast<double>(heads) : 1.0;
                    for (int j = 0; j < keys; ++j) o.weights[wrow * lk + j] += logits[j] / sum * factor;
                }
            }
        }
    }
}

}  // namespace attnbatch::kernels
