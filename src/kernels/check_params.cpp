// Preconditions of every kernel, checked before any work starts.
#include <cmath>
#include <sstream>

#include "attnbatch/kernels/attention.hpp"

namespace attnbatch::kernels {

namespace {

std::string describe(const char* what, long long found, const char* expected) {
    std::ostringstream out;
    out << "attention kernel: " << what << " is " << found << ", expected " << expected;
    return out.str();
}

// Rows must not overlap within a head. Heads and sequences are placed by the caller and may
// interleave (heads packed in the feature axis), so of them only non-negative strides are asked.
bool strides_cover(const TensorStrides& s, int rows, int cols) {
    const bool rows_apart = rows <= 1 || s.row >= cols;
    return rows_apart && s.seq >= 0 && s.head >= 0 && s.row >= 0;
}

}  // namespace

std::string check_attention_params(const AttentionParams& p) {
    if (p.batch < 0) return describe("batch", p.batch, ">= 0");
    if (p.heads < 1) return describe("heads", p.heads, ">= 1");
    if (p.kv_heads < 0 || p.kv_heads > p.heads || (p.kv_heads > 0 && p.heads % p.kv_heads != 0)) {
        return describe("kv_heads", p.kv_heads, "0 (= heads) or a divisor of heads");
    }
    if (p.len_q < 1) return describe("len_q", p.len_q, ">= 1");
    if (p.q_offset < 0) return describe("q_offset", p.q_offset, ">= 0");
    if (p.len_k < 1) return describe("len_k", p.len_k, ">= 1");
    if (p.dim_k < 1) return describe("dim_k", p.dim_k, ">= 1");
    if (p.dim_v < 1) return describe("dim_v", p.dim_v, ">= 1");
    if (!std::isfinite(p.scale) || p.scale <= 0.0f) {
        return "attention kernel: scale must be a finite positive number";
    }
    if (p.batch > 0 && (p.q == nullptr || p.k == nullptr || p.v == nullptr || p.out == nullptr)) {
        return "attention kernel: q, k, v and out must not be null";
    }
    if (!strides_cover(p.q_strides, p.len_q, p.dim_k)) return "attention kernel: q strides overlap rows (row stride < d_k) or are negative";
    if (!strides_cover(p.k_strides, p.len_k, p.dim_k)) return "attention kernel: k strides overlap rows (row stride < d_k) or are negative";
    if (!strides_cover(p.v_strides, p.len_k, p.dim_v)) return "attention kernel: v strides overlap rows (row stride < d_v) or are negative";
    if (!strides_cover(p.out_strides, p.len_q, p.dim_v)) return "attention kernel: out strides overlap rows (row stride < d_v) or are negative";
    // Outputs are written by many threads: heads or sequences sharing rows would race.
    if ((p.heads > 1 && p.out_strides.head < p.dim_v) || (p.batch > 1 && p.out_strides.seq == 0)) {
        return "attention kernel: out strides make heads or sequences share rows (head stride < d_v or sequence stride 0)";
    }
    if (p.weights_mode != WeightsMode::none && p.weights == nullptr && p.batch > 0) {
        return "attention kernel: weights requested but the weights pointer is null";
    }
    if (p.lengths != nullptr) {
        // A sequence may be longer than the keys given only when no row can see past them:
        // causal rows [q_offset, q_offset + len_q) with the first len_k >= q_offset + len_q keys.
        const bool keys_cover_rows = p.causal && static_cast<long>(p.q_offset) + p.len_q <= p.len_k;
        const int limit = p.len_k;
        for (int b = 0; b < p.batch; ++b) {
            if (p.lengths[b] < 0 || (p.lengths[b] > limit && !keys_cover_rows)) {
                std::ostringstream out;
                out << "attention kernel: lengths[" << b << "] is " << p.lengths[b]
                    << ", expected 0 <= length <= " << limit << " (len_k)";
                return out.str();
            }
        }
    }
    return {};
}

}  // namespace attnbatch::kernels
