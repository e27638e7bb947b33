// The plain reference: every logit in double, a three-pass softmax per row (max, then sum
// and weighted values, then weights), no tiling and no scratch. It defines what the blocked
// kernel must reproduce and is what `verify` recomputes with. With bf16 operands (the floor of
// the bf16 kernel's error) the same arithmetic runs on Q, K, V and P rounded to bfloat16.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attnbatch/kernels/attention.hpp"
#include "attnbatch/kernels/bf16.hpp"
#include "attnbatch/kernels/half.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace attnbatch::kernels {

namespace {

struct RowView {
    const float* q;        // (d_k)
    const float* k;        // (Lk, d_k) with row stride k_row
    const float* v;        // (Lk, d_v) with row stride v_row
    std::ptrdiff_t k_row, v_row;
    int dim_k, dim_v, keys;  // keys: visible keys, the first `keys` rows
    double scale;
    bool bf16_operands;      // Q, K, V and the P of P V rounded to bfloat16 first
};

// An operand of the two products as the row's arithmetic sees it.
double operand(const RowView& r, float x) { return r.bf16_operands ? round_to_bf16(x) : x; }
double probability_operand(const RowView& r, double p) {
    return r.bf16_operands ? round_to_bf16(static_cast<float>(p)) : p;
}

double logit(const RowView& r, int j) {
    const float* kj = r.k + j * r.k_row;
    double dot = 0.0;
    for (int c = 0; c < r.dim_k; ++c) dot += operand(r, r.q[c]) * operand(r, kj[c]);
    return dot * r.scale;
}

// Writes the row's output into acc (d_v doubles) and returns (max, sum) of its logits.
struct RowStats {
    double max, sum;
};

RowStats reference_row(const RowView& r, double* acc) {
    for (int c = 0; c < r.dim_v; ++c) acc[c] = 0.0;
    if (r.keys == 0) return {-std::numeric_limits<double>::infinity(), 0.0};
    double m = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < r.keys; ++j) m = std::fmax(m, logit(r, j));
    double sum = 0.0;
    for (int j = 0; j < r.keys; ++j) {
        const double e = std::exp(logit(r, j) - m);
        sum += e;
        const double weight = probability_operand(r, e);
        const float* vj = r.v + j * r.v_row;
        for (int c = 0; c < r.dim_v; ++c) acc[c] += weight * operand(r, vj[c]);
    }
    for (int c = 0; c < r.dim_v; ++c) acc[c] /= sum;
    return {m, sum};
}

// Keys row i (of q, at position q_offset + i) sees.
int visible_keys(const AttentionParams& p, int b, int i) {
    const int position = p.q_offset + i;
    int keys = p.len_k;
    if (p.lengths) {
        const int n = p.lengths[b];
        if (position >= n) return 0;
        if (n < keys) keys = n;
    }
    if (p.causal && keys > position + 1) keys = position + 1;
    return keys;
}

RowView row_view(const AttentionParams& p, int b, int h, int i, bool bf16_operands = false) {
    RowView r;
    r.q = p.q + b * p.q_strides.seq + h * p.q_strides.head + i * p.q_strides.row;
    const int kv_h = kv_head_of(p, h);
    r.k = p.k + b * p.k_strides.seq + kv_h * p.k_strides.head;
    r.v = p.v + b * p.v_strides.seq + kv_h * p.v_strides.head;
    r.k_row = p.k_strides.row;
    r.v_row = p.v_strides.row;
    r.dim_k = p.dim_k;
    r.dim_v = p.dim_v;
    r.keys = visible_keys(p, b, i);
    r.scale = static_cast<double>(p.scale);
    r.bf16_operands = bf16_operands;
    return r;
}

// Adds weight_factor * softmax weights of the row to w (Lk entries, zero past the visible keys).
void accumulate_weights(const RowView& r, RowStats stats, double weight_factor, double* w) {
    for (int j = 0; j < r.keys; ++j) w[j] += std::exp(logit(r, j) - stats.max) / stats.sum * weight_factor;
}

void reference_rows(const AttentionParams& p, const ReferenceOutputs& o, bool bf16_operands) {
    const std::size_t lq = p.len_q, lk = p.len_k, dv = p.dim_v, heads = p.heads;
    const bool mean = o.weights_mean_over_heads;
    if (o.weights) {
        std::memset(o.weights, 0, sizeof(double) * p.batch * (mean ? 1 : heads) * lq * lk);
    }
    std::vector<double> acc_storage;
    double* acc_scratch = nullptr;
    if (!o.out) {
        acc_storage.resize(dv);
        acc_scratch = acc_storage.data();
    }
    for (int b = 0; b < p.batch; ++b) {
        for (int h = 0; h < p.heads; ++h) {
            for (int i = 0; i < p.len_q; ++i) {
                const std::size_t row = (static_cast<std::size_t>(b) * heads + h) * lq + i;
                const RowView r = row_view(p, b, h, i, bf16_operands);
                double* acc = o.out ? o.out + row * dv : acc_scratch;
                const RowStats stats = reference_row(r, acc);
                if (o.lse) {
                    o.lse[row] = r.keys ? stats.max + std::log(stats.sum) : -std::numeric_limits<double>::infinity();
                }
                if (o.weights && r.keys) {
                    const std::size_t wrow = mean ? static_cast<std::size_t>(b) * lq + i : row;
                    accumulate_weights(r, stats, mean ? 1.0 / static_cast<double>(heads) : 1.0, o.weights + wrow * lk);
                }
            }
        }
    }
}

}  // namespace

void reference_attention_f64(const AttentionParams& p, const ReferenceOutputs& o) { reference_rows(p, o, false); }

void bf16_operands_attention_f64(const AttentionParams& p, const ReferenceOutputs& o) { reference_rows(p, o, true); }

std::size_t reference_workspace_bytes(const AttentionParams& p, int threads) {
    return sizeof(double) * (static_cast<std::size_t>(p.dim_v) + p.len_k) * threads;
}

// The reference as a run-time selectable kernel: same maths in double, float outputs. A task is
// one row (all heads of it for the head mean), so it also runs in parallel deterministically.
void reference_forward(const AttentionParams& p, int threads, void* workspace) {
    const bool mean = p.weights_mode == WeightsMode::mean_over_heads;  // weights non-null: checked
    const bool all = p.weights_mode == WeightsMode::all;
    const std::size_t lq = p.len_q, lk = p.len_k, heads = p.heads;
    const long rows = static_cast<long>(p.batch) * (mean ? 1 : p.heads) * p.len_q;
    auto store_weights = [&](std::size_t wrow, const double* w) {
        if (p.weights_type == WeightsType::f32) {
            float* dst = static_cast<float*>(p.weights) + wrow * lk;
            for (std::size_t j = 0; j < lk; ++j) dst[j] = static_cast<float>(w[j]);
        } else {
            std::uint16_t* dst = static_cast<std::uint16_t*>(p.weights) + wrow * lk;
            for (std::size_t j = 0; j < lk; ++j) dst[j] = float_to_half(static_cast<float>(w[j]));
        }
    };
#if defined(_OPENMP)
#pragma omp parallel num_threads(threads)
#endif
    {
#if defined(_OPENMP)
        const int me = omp_get_thread_num();
#else
        const int me = 0;
        (void)threads;
#endif
        double* acc = static_cast<double*>(workspace) + (static_cast<std::size_t>(p.dim_v) + lk) * me;
        double* w = acc + p.dim_v;
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, 16)
#endif
        for (long id = 0; id < rows; ++id) {
            const int i = static_cast<int>(id % p.len_q);
            const long outer = id / p.len_q;
            const int b = static_cast<int>(mean ? outer : outer / p.heads);
            const int h_first = mean ? 0 : static_cast<int>(outer % p.heads);
            const int h_last = mean ? p.heads : h_first + 1;
            for (std::size_t j = 0; j < lk; ++j) w[j] = 0.0;
            for (int h = h_first; h < h_last; ++h) {
                const std::size_t row = (static_cast<std::size_t>(b) * heads + h) * lq + i;
                const RowView r = row_view(p, b, h, i);
                const RowStats stats = reference_row(r, acc);
                float* orow = p.out + b * p.out_strides.seq + h * p.out_strides.head + i * p.out_strides.row;
                for (int c = 0; c < p.dim_v; ++c) orow[c] = static_cast<float>(acc[c]);
                if (p.lse) {
                    p.lse[row] = r.keys ? static_cast<float>(stats.max + std::log(stats.sum))
                                        : -std::numeric_limits<float>::infinity();
                }
                if ((mean || all) && r.keys) accumulate_weights(r, stats, mean ? 1.0 / static_cast<double>(heads) : 1.0, w);
                if (all) store_weights(row, w);
            }
            if (mean) store_weights(static_cast<std::size_t>(b) * lq + i, w);
        }
    }
}

}  // namespace attnbatch::kernels
