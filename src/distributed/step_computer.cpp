#include "attnbatch/distributed/step_computer.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnbatch/kernels/projection.hpp"
#include "attnbatch/kernels/rope.hpp"

namespace attnbatch::distributed {

namespace k = attnbatch::kernels;

namespace {

struct PackedMatrix {
    std::vector<float> packed;
    const float* bias = nullptr;
    int in = 0, out = 0;
};

PackedMatrix pack(const std::vector<float>& w, const std::vector<float>& bias, int in, int out, k::Isa isa) {
    PackedMatrix m;
    m.in = in;
    m.out = out;
    m.packed.resize(k::projection_packed_floats(in, out, isa));
    k::pack_projection_weights(w.data(), in, out, m.packed.data(), isa);
    m.bias = bias.empty() ? nullptr : bias.data();
    return m;
}

}  // namespace

// Buffers of one unit, reused from unit to unit; all (count, ...) with whole sequences.
class StepComputer::Impl {
public:
    Impl(const io::InputSpec& spec, const std::optional<io::ProjectionWeights>& weights,
                 const AttentionSettings& settings, const io::OutputLayout& layout)
        : spec_(spec), settings_(settings), layout_(layout) {
        isa_ = k::resolve_isa(settings.kernel.isa);
        if (weights) {
            const int d = static_cast<int>(spec.weights->d_in);
            const int qk = static_cast<int>(spec.weights->qk_width), v = static_cast<int>(spec.weights->v_width);
            const int kw = static_cast<int>(spec.weights->key_width()), attended = static_cast<int>(spec.heads * spec.d_v);
            w_q_ = pack(weights->w_q, weights->b_q, d, qk, isa_);
            w_k_ = pack(weights->w_k, weights->b_k, d, kw, isa_);
            w_v_ = pack(weights->w_v, weights->b_v, d, v, isa_);
            if (spec.weights->has_w_o) w_o_ = pack(weights->w_o, weights->b_o, attended, static_cast<int>(spec.d_out()), isa_);
            projected_ = true;
        }
        if (settings.rope_theta > 0) {
            // Positions 0..L-1: a row's angle depends on its position in the sequence only.
            const std::size_t half = static_cast<std::size_t>(spec.d_k / 2);
            rope_cos_.resize(static_cast<std::size_t>(spec.len) * half);
            rope_sin_.resize(rope_cos_.size());
            k::rope_table(settings.rope_theta, static_cast<int>(spec.d_k), 0, static_cast<int>(spec.len), rope_cos_.data(),
                          rope_sin_.data());
        }
    }

    // Fills `block` (output, lse, lengths, attention) for the sequences of `in`.
    void compute(const io::InputBlock& in, io::OutputBlock& block, ComputeTally& times) {
        if (in.piece()) return compute_piece(in, block, times);
        if (!in.offsets.empty()) return compute_packed(in, block, times);
        const std::int64_t count = in.count;
        const std::size_t len = spec_.len, heads = spec_.heads, dk = spec_.d_k, dv = spec_.d_v;
        const std::size_t kv_heads = static_cast<std::size_t>(spec_.kv_head_count());

        // Q (count, H, L, d_k), K and V (count, G, L, d) views through strides, no copies
        // unless projected or rotated.
        const float *q = nullptr, *kk = nullptr, *v = nullptr;
        k::TensorStrides qs, ks, vs;
        if (projected_) {
            q_.resize(count * len * heads * dk);
            k_.resize(count * len * kv_heads * dk);
            v_.resize(count * len * kv_heads * dv);
            project_into(w_q_, in, q_.data());
            project_into(w_k_, in, k_.data());
            project_into(w_v_, in, v_.data());
            q = q_.data();
            kk = k_.data();
            v = v_.data();
            qs = packed_heads(dk);
            ks = packed_heads(dk, kv_heads);
            vs = packed_heads(dv, kv_heads);
        } else if (spec_.mode == io::InputMode::embeddings) {
            q = kk = v = in.x.data();  // the seed's softmax(X X^T / sqrt(d)) X, heads split along d
            qs = ks = vs = k::TensorStrides{static_cast<std::ptrdiff_t>(len * spec_.d), static_cast<std::ptrdiff_t>(dk),
                                            static_cast<std::ptrdiff_t>(spec_.d)};
        } else {
            q = in.q.data();
            kk = in.k.data();
            v = in.v.data();
            if (spec_.layout == io::QkvLayout::packed) {
                qs = packed_heads(dk);
                ks = packed_heads(dk, kv_heads);
                vs = packed_heads(dv, kv_heads);
            } else {
                const auto split = [len](std::size_t count_heads, std::size_t d) {
                    return k::TensorStrides{static_cast<std::ptrdiff_t>(count_heads * len * d), static_cast<std::ptrdiff_t>(len * d),
                                            static_cast<std::ptrdiff_t>(d)};
                };
                qs = split(heads, dk);
                ks = split(kv_heads, dk);
                vs = split(kv_heads, dv);
            }
        }
        if (settings_.rope_theta > 0) {
            // Projected Q and K are ours to rotate in place; input data is rotated into copies.
            float* q_rotated = q_.data();
            float* k_rotated = k_.data();
            if (!projected_) {
                q_.resize(count * len * heads * dk);
                k_.resize(count * len * kv_heads * dk);
                q_rotated = q_.data();
                k_rotated = k_.data();
            }
            rotate(q, qs, q_rotated, packed_heads(dk), heads, in);
            rotate(kk, ks, k_rotated, packed_heads(dk, kv_heads), kv_heads, in);
            q = q_rotated;
            kk = k_rotated;
            qs = packed_heads(dk);
            ks = packed_heads(dk, kv_heads);
        }

        attended_.resize(count * len * heads * dv);  // (count, L, H*d_v): heads side by side
        lse_.resize(count * heads * len);
        const auto [w_first, w_last] = layout_.weights_range(in.first, in.first + count);
        const std::size_t map_elements = static_cast<std::size_t>(layout_.weights_heads()) * len * len;
        const bool f16 = layout_.weights_dtype == io::WeightsDtype::f16;
        if (w_last > w_first) {
            if (f16) attention_f16_.resize((w_last - w_first) * map_elements);
            else attention_f32_.resize((w_last - w_first) * map_elements);
        }

        k::AttentionParams p;
        p.heads = static_cast<int>(heads);
        p.kv_heads = static_cast<int>(kv_heads);
        p.len_q = p.len_k = static_cast<int>(len);
        p.dim_k = static_cast<int>(dk);
        p.dim_v = static_cast<int>(dv);
        p.scale = settings_.scale;
        p.causal = settings_.causal;
        p.q_strides = qs;
        p.k_strides = ks;
        p.v_strides = vs;
        p.out_strides = packed_heads(dv);
        // Sequences with stored weights are one kernel call, those before and after are others.
        const std::int64_t end = in.first + count;
        const bool any_weights = w_last > w_first;
        const std::int64_t bounds[4] = {in.first, any_weights ? w_first : end, any_weights ? w_last : end, end};
        for (int part = 0; part < 3; ++part) {
            const std::int64_t lo = bounds[part], b = bounds[part + 1];
            if (b <= lo) continue;
            const std::size_t off = static_cast<std::size_t>(lo - in.first);
            p.batch = static_cast<int>(b - lo);
            p.q = q + off * qs.seq;
            p.k = kk + off * ks.seq;
            p.v = v + off * vs.seq;
            p.out = attended_.data() + off * p.out_strides.seq;
            p.lengths = in.lengths.data() + off;
            p.lse = lse_.data() + off * heads * len;
            p.weights = nullptr;
            p.weights_mode = k::WeightsMode::none;
            if (part == 1 && layout_.save_weights != io::SaveWeights::none) {
                p.weights_mode = layout_.save_weights == io::SaveWeights::mean ? k::WeightsMode::mean_over_heads : k::WeightsMode::all;
                p.weights_type = f16 ? k::WeightsType::f16 : k::WeightsType::f32;
                const std::size_t w_off = static_cast<std::size_t>(lo - w_first) * map_elements;
                p.weights = f16 ? static_cast<void*>(attention_f16_.data() + w_off) : static_cast<void*>(attention_f32_.data() + w_off);
            }
            const std::size_t bytes = k::attention_workspace_bytes(p, settings_.kernel);
            if (workspace_.size() < bytes) workspace_.resize(bytes);
            k::attention_forward(p, settings_.kernel, workspace_.data(), workspace_.size());
        }

        const float* final_output = attended_.data();
        if (!w_o_.packed.empty()) {
            output_.resize(count * len * static_cast<std::size_t>(w_o_.out));
            k::ProjectionParams pp;
            pp.x = attended_.data();
            pp.x_seq_stride = static_cast<std::ptrdiff_t>(len * heads * dv);
            pp.x_row_stride = static_cast<std::ptrdiff_t>(heads * dv);
            pp.y = output_.data();
            pp.y_row_stride = w_o_.out;
            pp.y_seq_stride = static_cast<std::ptrdiff_t>(len) * w_o_.out;
            pp.batch = static_cast<int>(count);
            pp.len = static_cast<int>(len);
            pp.in = w_o_.in;
            pp.out = w_o_.out;
            pp.lengths = in.lengths.data();
            pp.packed_w = w_o_.packed.data();
            pp.bias = w_o_.bias;
            run_projection(pp);
            final_output = output_.data();
        }
        for (std::int64_t s = 0; s < count; ++s) {
            const double n = in.lengths[s];
            const double pairs = settings_.causal ? n * (n + 1) / 2 : n * n;
            times.attention_flops += 2.0 * pairs * static_cast<double>(heads * (dk + dv));
            if (projected_) {
                times.projection_flops += 2.0 * n * static_cast<double>(spec_.weights->d_in) * static_cast<double>(heads * dk + kv_heads * (dk + dv));
                if (!w_o_.packed.empty()) times.projection_flops += 2.0 * n * w_o_.in * w_o_.out;
            }
            times.tokens += in.lengths[s];
        }
        times.sequences += count;
        block.output = final_output;
        block.lse = lse_.data();
        block.lengths = in.lengths.data();
        block.attention_f32 = f16 || w_last <= w_first ? nullptr : attention_f32_.data();
        block.attention_f16 = f16 && w_last > w_first ? attention_f16_.data() : nullptr;
    }

    // Rows of the step's input as one matrix (rows, width), row stride = width: the heads of
    // packed Q/K/V side by side, or the embeddings.
    struct RowsView {
        const float* data = nullptr;
        std::size_t rows = 0;
        int width = 0;
    };

    // Y (rows, w.out) = X W + b for every row of `x` (row-independent: each row's arithmetic is
    // its own, so rows computed in any grouping give the same bits), in groups of kProjectionRows
    // so that the threads share the work; y holds `rows` rounded up to the group, the extra rows
    // zero. Rows [valid, rows) are written as zeros.
    void project_rows(const PackedMatrix& w, RowsView x, std::size_t valid, std::vector<float>& y) {
        constexpr std::size_t kProjectionRows = 64;
        const std::size_t groups = std::max<std::size_t>(1, (x.rows + kProjectionRows - 1) / kProjectionRows);
        // The groups past the valid rows are not computed: zero, as rows past a length are.
        const std::size_t computed = (valid + kProjectionRows - 1) / kProjectionRows * kProjectionRows;
        const auto width = static_cast<std::size_t>(w.out);
        y.resize(groups * kProjectionRows * width);
        std::fill(y.begin() + static_cast<std::ptrdiff_t>(std::min(computed, groups * kProjectionRows) * width), y.end(), 0.0f);
        if (valid == 0) return;
        group_rows_.resize(groups);
        for (std::size_t g = 0; g < groups; ++g) {
            const std::size_t begin = g * kProjectionRows;
            group_rows_[g] = static_cast<std::int32_t>(begin < valid ? std::min(kProjectionRows, valid - begin) : 0);
        }
        k::ProjectionParams pp;
        pp.x = x.data;
        pp.x_row_stride = x.width;
        pp.x_seq_stride = static_cast<std::ptrdiff_t>(kProjectionRows) * x.width;
        pp.y = y.data();
        pp.y_row_stride = w.out;
        pp.y_seq_stride = static_cast<std::ptrdiff_t>(kProjectionRows) * w.out;
        pp.batch = static_cast<int>((valid + kProjectionRows - 1) / kProjectionRows);
        pp.len = static_cast<int>(kProjectionRows);
        pp.in = w.in;
        pp.out = w.out;
        pp.lengths = group_rows_.data();
        pp.packed_w = w.packed.data();
        pp.bias = w.bias;
        run_projection(pp);
    }

    // Query rows [row_first, row_last) of one sequence, with its first key_rows keys (a piece,
    // plan.hpp). The rows past the sequence's length are computed as such (zeros, -inf). The
    // kernel computes each row as in a whole-sequence call (attention.hpp, q_offset), the
    // projections each row on its own: the bytes do not depend on the piece.
    void compute_piece(const io::InputBlock& in, io::OutputBlock& block, ComputeTally& times) {
        const std::size_t heads = spec_.heads, dk = spec_.d_k, dv = spec_.d_v, len = spec_.len;
        const std::size_t kv_heads = static_cast<std::size_t>(spec_.kv_head_count());
        const std::size_t rows = static_cast<std::size_t>(in.row_last - in.row_first);
        const std::size_t q_rows = static_cast<std::size_t>(in.query_rows()), keys = static_cast<std::size_t>(in.key_rows);
        const std::int64_t sequence = in.first;
        const std::int32_t length = in.lengths[0];
        const bool split = spec_.mode == io::InputMode::qkv && spec_.layout == io::QkvLayout::split;

        // Q (rows, H*d_k) (split input: (H, rows, d_k)) with its invalid rows zero: the kernel
        // may read whole micro-tiles of rows up to len_q.
        const float *q = nullptr, *kk = nullptr, *v = nullptr;
        k::TensorStrides qs, ks, vs;
        const auto rows_strides = [&](std::size_t r, std::size_t d, std::size_t width) {
            return split ? k::TensorStrides{0, static_cast<std::ptrdiff_t>(r * d), static_cast<std::ptrdiff_t>(d)}
                         : k::TensorStrides{0, static_cast<std::ptrdiff_t>(d), static_cast<std::ptrdiff_t>(width)};
        };
        if (projected_) {
            const int d = static_cast<int>(spec_.d);
            const float* x_rows = q_rows > 0 ? in.x.data() + static_cast<std::size_t>(in.row_first) * spec_.d : in.x.data();
            project_rows(w_q_, RowsView{x_rows, rows, d}, q_rows, q_);
            project_rows(w_k_, RowsView{in.x.data(), keys, d}, keys, k_);
            project_rows(w_v_, RowsView{in.x.data(), keys, d}, keys, v_);
            q = q_.data();
            kk = k_.data();
            v = v_.data();
            qs = rows_strides(rows, dk, heads * dk);
            ks = rows_strides(keys, dk, kv_heads * dk);
            vs = rows_strides(keys, dv, kv_heads * dv);
        } else if (spec_.mode == io::InputMode::embeddings) {
            const std::size_t d = spec_.d;
            q_.assign(rows * d, 0.0f);
            if (q_rows > 0) std::memcpy(q_.data(), in.x.data() + static_cast<std::size_t>(in.row_first) * d, q_rows * d * sizeof(float));
            q = q_.data();
            kk = v = in.x.data();
            qs = ks = vs = k::TensorStrides{0, static_cast<std::ptrdiff_t>(dk), static_cast<std::ptrdiff_t>(d)};
        } else {
            q_.assign(rows * heads * dk, 0.0f);
            if (split) {
                for (std::size_t h = 0; h < heads; ++h) {
                    std::memcpy(q_.data() + h * rows * dk, in.q.data() + h * q_rows * dk, q_rows * dk * sizeof(float));
                }
            } else {
                std::memcpy(q_.data(), in.q.data(), q_rows * heads * dk * sizeof(float));
            }
            q = q_.data();
            kk = in.k.data();
            v = in.v.data();
            qs = rows_strides(rows, dk, heads * dk);
            ks = rows_strides(keys, dk, kv_heads * dk);
            vs = rows_strides(keys, dv, kv_heads * dv);
        }
        if (settings_.rope_theta > 0 && keys > 0) {
            // Q is already a copy of ours (rows at positions row_first...); K is rotated into
            // one unless projected (positions 0...). The table is indexed by position.
            if (!projected_) {
                const std::size_t k_elements = split ? kv_heads * keys * dk : keys * static_cast<std::size_t>(ks.row);
                k_.assign(kk, kk + k_elements);
                kk = k_.data();
            }
            rotate_rows(q_.data(), qs, heads, rows, in.row_first, length);
            rotate_rows(k_.data(), ks, kv_heads, keys, 0, length);
        }

        const bool weights = layout_.save_weights != io::SaveWeights::none && sequence >= layout_.weights_first &&
                             sequence < layout_.weights_end();
        const bool f16 = layout_.weights_dtype == io::WeightsDtype::f16;
        const std::size_t weights_heads = static_cast<std::size_t>(layout_.weights_heads());
        // The kernel writes every element (zeros and -inf past the length); without valid rows
        // it does not run, and the rows are those of a sequence's padding.
        const bool attend = q_rows > 0 && keys > 0;
        attended_.resize(rows * heads * dv);
        lse_.resize(heads * rows);
        if (weights) {
            if (f16) attention_f16_.resize(weights_heads * rows * len);
            else attention_f32_.resize(weights_heads * rows * len);
        }
        if (!attend) {
            std::fill(attended_.begin(), attended_.end(), 0.0f);
            std::fill(lse_.begin(), lse_.end(), -std::numeric_limits<float>::infinity());
            if (weights && f16) std::fill(attention_f16_.begin(), attention_f16_.end(), std::uint16_t{0});
            if (weights && !f16) std::fill(attention_f32_.begin(), attention_f32_.end(), 0.0f);
        }
        if (attend) {
            k::AttentionParams p;
            p.batch = 1;
            p.heads = static_cast<int>(heads);
            p.kv_heads = static_cast<int>(kv_heads);
            p.len_q = static_cast<int>(rows);
            p.q_offset = static_cast<int>(in.row_first);
            p.len_k = static_cast<int>(keys);
            p.dim_k = static_cast<int>(dk);
            p.dim_v = static_cast<int>(dv);
            p.scale = settings_.scale;
            p.causal = settings_.causal;
            p.q = q;
            p.k = kk;
            p.v = v;
            p.q_strides = qs;
            p.k_strides = ks;
            p.v_strides = vs;
            p.out = attended_.data();
            p.out_strides = k::TensorStrides{0, static_cast<std::ptrdiff_t>(dv), static_cast<std::ptrdiff_t>(heads * dv)};
            p.lengths = &length;
            p.lse = lse_.data();
            if (weights) {
                p.weights_mode = layout_.save_weights == io::SaveWeights::mean ? k::WeightsMode::mean_over_heads : k::WeightsMode::all;
                p.weights_type = f16 ? k::WeightsType::f16 : k::WeightsType::f32;
                p.weights = f16 ? static_cast<void*>(attention_f16_.data()) : static_cast<void*>(attention_f32_.data());
            }
            const std::size_t bytes = k::attention_workspace_bytes(p, settings_.kernel);
            if (workspace_.size() < bytes) workspace_.resize(bytes);
            k::attention_forward(p, settings_.kernel, workspace_.data(), workspace_.size());
            // The kernel's rows are `keys` wide; the maps' rows are L wide, zero past the keys.
            if (weights && keys < len) {
                if (f16) widen_rows(attention_f16_.data(), weights_heads * rows, keys, len);
                else widen_rows(attention_f32_.data(), weights_heads * rows, keys, len);
            }
        }
        const float* final_output = attended_.data();
        if (!w_o_.packed.empty()) {
            project_rows(w_o_, RowsView{attended_.data(), rows, static_cast<int>(heads * dv)}, q_rows, output_);
            final_output = output_.data();
        }
        const double q0 = static_cast<double>(in.row_first), q1 = q0 + static_cast<double>(q_rows);
        const double pairs = settings_.causal ? (q1 * (q1 + 1) - q0 * (q0 + 1)) / 2 : static_cast<double>(q_rows) * length;
        times.attention_flops += q_rows > 0 ? 2.0 * pairs * static_cast<double>(heads * (dk + dv)) : 0.0;
        if (projected_) {
            times.projection_flops += 2.0 * static_cast<double>(spec_.weights->d_in) *
                                      static_cast<double>(heads * q_rows * dk + kv_heads * keys * (dk + dv));
            if (!w_o_.packed.empty()) times.projection_flops += 2.0 * static_cast<double>(q_rows) * w_o_.in * w_o_.out;
        }
        times.tokens += static_cast<std::int64_t>(q_rows);
        times.sequences += in.row_last == layout_.rows_of(sequence) ? 1 : 0;
        block.output = final_output;
        block.lse = lse_.data();
        block.lengths = in.lengths.data();
        block.attention_f32 = weights && !f16 ? attention_f32_.data() : nullptr;
        block.attention_f16 = weights && f16 ? attention_f16_.data() : nullptr;
    }

    // Rows of `count` elements at the start of `data` spread to rows of `width` elements, the
    // rest of each row zero (in place: from the last row back).
    template <class T>
    static void widen_rows(T* data, std::size_t rows, std::size_t count, std::size_t width) {
        for (std::size_t r = rows; r-- > 0;) {
            std::memmove(data + r * width, data + r * count, count * sizeof(T));
            std::fill(data + r * width + count, data + (r + 1) * width, T{});
        }
    }

    // Whole sequences of the packed layout: rows end to end, no padding. Projections over all
    // rows at once; attention one sequence per kernel call (its rows, its keys; L keys wide for
    // the maps that are stored, whose rows are L wide).
    void compute_packed(const io::InputBlock& in, io::OutputBlock& block, ComputeTally& times) {
        const std::size_t heads = spec_.heads, dk = spec_.d_k, dv = spec_.d_v, len = spec_.len;
        const std::size_t kv_heads = static_cast<std::size_t>(spec_.kv_head_count());
        const std::size_t total = static_cast<std::size_t>(in.offsets.back());
        const float *q = nullptr, *kk = nullptr, *v = nullptr;
        std::size_t q_width = 0, k_width = 0, v_width = 0;  // row strides
        std::ptrdiff_t head_k = static_cast<std::ptrdiff_t>(dk), head_v = static_cast<std::ptrdiff_t>(dv);
        if (projected_) {
            const int d = static_cast<int>(spec_.d);
            project_rows(w_q_, RowsView{in.x.data(), total, d}, total, q_);
            project_rows(w_k_, RowsView{in.x.data(), total, d}, total, k_);
            project_rows(w_v_, RowsView{in.x.data(), total, d}, total, v_);
            q = q_.data();
            kk = k_.data();
            v = v_.data();
            q_width = heads * dk;
            k_width = kv_heads * dk;
            v_width = kv_heads * dv;
        } else if (spec_.mode == io::InputMode::embeddings) {
            q = kk = v = in.x.data();
            q_width = k_width = v_width = spec_.d;
        } else {
            q = in.q.data();
            kk = in.k.data();
            v = in.v.data();
            q_width = heads * dk;
            k_width = kv_heads * dk;
            v_width = kv_heads * dv;
        }
        if (settings_.rope_theta > 0) {
            // Each sequence's rows at their positions 0..n-1; input data is rotated into copies.
            if (!projected_) {
                q_.assign(q, q + total * q_width);
                k_.assign(kk, kk + total * k_width);
                q = q_.data();
                kk = k_.data();
            }
            for (std::int64_t i = 0; i < in.count; ++i) {
                const std::int32_t length = in.lengths[static_cast<std::size_t>(i)];
                const auto row = static_cast<std::size_t>(in.offsets[static_cast<std::size_t>(i)]);
                const auto n = static_cast<std::size_t>(length);
                rotate_rows(q_.data() + row * q_width, k::TensorStrides{0, head_k, static_cast<std::ptrdiff_t>(q_width)}, heads, n, 0, length);
                rotate_rows(k_.data() + row * k_width, k::TensorStrides{0, head_k, static_cast<std::ptrdiff_t>(k_width)}, kv_heads, n, 0, length);
            }
        }
        // Every row belongs to a sequence the kernel computes whole: no initial values needed.
        attended_.resize(total * heads * dv);
        lse_.resize(heads * total);
        const auto [w_first, w_last] = layout_.weights_range(in.first, in.first + in.count);
        const bool f16 = layout_.weights_dtype == io::WeightsDtype::f16;
        const std::size_t weights_heads = static_cast<std::size_t>(layout_.weights_heads());
        std::size_t map_rows = 0;
        for (std::int64_t s = w_first; s < w_last; ++s) map_rows += static_cast<std::size_t>(in.lengths[static_cast<std::size_t>(s - in.first)]);
        if (f16) attention_f16_.resize(weights_heads * map_rows * len);
        else attention_f32_.resize(weights_heads * map_rows * len);

        // One kernel call per sequence. Long sequences get every thread; short ones (whose
        // few query tiles would leave threads idle) are spread over the threads, one sequence
        // per thread at a time. The kernel's rows do not depend on its thread count.
        std::vector<std::size_t> map_offsets(static_cast<std::size_t>(in.count), 0);
        std::vector<std::int64_t> long_ones, short_ones;
        std::size_t map_offset = 0;
        for (std::int64_t i = 0; i < in.count; ++i) {
            const std::int32_t length = in.lengths[static_cast<std::size_t>(i)];
            const std::int64_t sequence = in.first + i;
            map_offsets[static_cast<std::size_t>(i)] = map_offset;
            if (sequence >= w_first && sequence < w_last) map_offset += weights_heads * static_cast<std::size_t>(length) * len;
            if (length == 0) continue;
            (length > kShortSequence ? long_ones : short_ones).push_back(i);
        }
        const auto params_for = [&](std::int64_t i, float* sequence_lse) {
            const std::int32_t& length = in.lengths[static_cast<std::size_t>(i)];
            const std::int64_t sequence = in.first + i;
            const bool weights = sequence >= w_first && sequence < w_last;
            const auto row = static_cast<std::size_t>(in.offsets[static_cast<std::size_t>(i)]);
            k::AttentionParams p;
            p.batch = 1;
            p.heads = static_cast<int>(heads);
            p.kv_heads = static_cast<int>(kv_heads);
            p.len_q = length;
            p.len_k = weights ? static_cast<int>(len) : length;
            p.dim_k = static_cast<int>(dk);
            p.dim_v = static_cast<int>(dv);
            p.scale = settings_.scale;
            p.causal = settings_.causal;
            p.q = q + row * q_width;
            p.k = kk + row * k_width;
            p.v = v + row * v_width;
            p.q_strides = k::TensorStrides{0, head_k, static_cast<std::ptrdiff_t>(q_width)};
            p.k_strides = k::TensorStrides{0, head_k, static_cast<std::ptrdiff_t>(k_width)};
            p.v_strides = k::TensorStrides{0, head_v, static_cast<std::ptrdiff_t>(v_width)};
            p.out = attended_.data() + row * heads * dv;
            p.out_strides = k::TensorStrides{0, static_cast<std::ptrdiff_t>(dv), static_cast<std::ptrdiff_t>(heads * dv)};
            p.lengths = &length;
            p.lse = sequence_lse;
            if (weights) {
                const std::size_t at = map_offsets[static_cast<std::size_t>(i)];
                p.weights_mode = layout_.save_weights == io::SaveWeights::mean ? k::WeightsMode::mean_over_heads : k::WeightsMode::all;
                p.weights_type = f16 ? k::WeightsType::f16 : k::WeightsType::f32;
                p.weights = f16 ? static_cast<void*>(attention_f16_.data() + at) : static_cast<void*>(attention_f32_.data() + at);
            }
            return p;
        };
        // (H, rows) of one call into the block's (H, total).
        const auto place_lse = [&](std::int64_t i, const float* sequence_lse) {
            const auto rows = static_cast<std::size_t>(in.lengths[static_cast<std::size_t>(i)]);
            const auto row = static_cast<std::size_t>(in.offsets[static_cast<std::size_t>(i)]);
            for (std::size_t h = 0; h < heads; ++h) {
                std::memcpy(lse_.data() + h * total + row, sequence_lse + h * rows, rows * sizeof(float));
            }
        };
        for (const std::int64_t i : long_ones) {
            sequence_lse_.resize(heads * static_cast<std::size_t>(in.lengths[static_cast<std::size_t>(i)]));
            const k::AttentionParams p = params_for(i, sequence_lse_.data());
            const std::size_t bytes = k::attention_workspace_bytes(p, settings_.kernel);
            if (workspace_.size() < bytes) workspace_.resize(bytes);
            k::attention_forward(p, settings_.kernel, workspace_.data(), workspace_.size());
            place_lse(i, sequence_lse_.data());
        }
        if (!short_ones.empty()) {
            k::KernelOptions one_thread = settings_.kernel;
            one_thread.threads = 1;
            const int threads = std::max(1, settings_.kernel.threads);
            std::size_t bytes = 0;
            for (const std::int64_t i : short_ones) bytes = std::max(bytes, k::attention_workspace_bytes(params_for(i, nullptr), one_thread));
            thread_workspaces_.resize(static_cast<std::size_t>(threads));
            thread_lse_.resize(static_cast<std::size_t>(threads));
            for (auto& workspace : thread_workspaces_) {
                if (workspace.size() < bytes) workspace.resize(bytes);
            }
            std::string failure;
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
#endif
            for (std::size_t j = 0; j < short_ones.size(); ++j) {
#if defined(_OPENMP)
                const auto me = static_cast<std::size_t>(omp_get_thread_num());
#else
                const std::size_t me = 0;
#endif
                const std::int64_t i = short_ones[j];
                try {
                    std::vector<float>& sequence_lse = thread_lse_[me];
                    sequence_lse.resize(heads * static_cast<std::size_t>(in.lengths[static_cast<std::size_t>(i)]));
                    const k::AttentionParams p = params_for(i, sequence_lse.data());
                    k::attention_forward(p, one_thread, thread_workspaces_[me].data(), thread_workspaces_[me].size());
                    place_lse(i, sequence_lse.data());
                } catch (const std::exception& e) {
#if defined(_OPENMP)
#pragma omp critical(attnbatch_packed_failure)
#endif
                    if (failure.empty()) failure = e.what();
                }
            }
            if (!failure.empty()) throw std::runtime_error(failure);
        }
        for (const std::int64_t i : long_ones) {
            const double n = in.lengths[static_cast<std::size_t>(i)];
            times.attention_flops += 2.0 * (settings_.causal ? n * (n + 1) / 2 : n * n) * static_cast<double>(heads * (dk + dv));
        }
        for (const std::int64_t i : short_ones) {
            const double n = in.lengths[static_cast<std::size_t>(i)];
            times.attention_flops += 2.0 * (settings_.causal ? n * (n + 1) / 2 : n * n) * static_cast<double>(heads * (dk + dv));
        }
        const float* final_output = attended_.data();
        if (!w_o_.packed.empty()) {
            project_rows(w_o_, RowsView{attended_.data(), total, static_cast<int>(heads * dv)}, total, output_);
            final_output = output_.data();
        }
        if (projected_) {
            times.projection_flops += 2.0 * static_cast<double>(total) * static_cast<double>(spec_.weights->d_in) *
                                      static_cast<double>(heads * dk + kv_heads * (dk + dv));
            if (!w_o_.packed.empty()) times.projection_flops += 2.0 * static_cast<double>(total) * w_o_.in * w_o_.out;
        }
        times.tokens += static_cast<std::int64_t>(total);
        times.sequences += in.count;
        block.output = final_output;
        block.lse = lse_.data();
        block.lengths = in.lengths.data();
        block.attention_f32 = !f16 && map_rows > 0 ? attention_f32_.data() : nullptr;
        block.attention_f16 = f16 && map_rows > 0 ? attention_f16_.data() : nullptr;
    }

private:
    // (count, L, heads*d): heads side by side in each row; `heads` 0 for H.
    k::TensorStrides packed_heads(std::size_t d, std::size_t heads = 0) const {
        const std::size_t len = spec_.len;
        if (heads == 0) heads = static_cast<std::size_t>(spec_.heads);
        return k::TensorStrides{static_cast<std::ptrdiff_t>(len * heads * d), static_cast<std::ptrdiff_t>(d),
                                static_cast<std::ptrdiff_t>(heads * d)};
    }

    // Rotary embeddings of `count_heads` heads of width d_k, rows at their positions 0..L-1.
    // Rows [q0, q1) of a sequence computed on their own take row_offset = q0 (the table is
    // indexed by absolute position), so a split sequence rotates exactly as a whole one.
    void rotate(const float* from, const k::TensorStrides& from_strides, float* to, const k::TensorStrides& to_strides,
                std::size_t count_heads, const io::InputBlock& in) const {
        k::RopeParams rp;
        rp.in = from;
        rp.in_strides = from_strides;
        rp.out = to;
        rp.out_strides = to_strides;
        rp.batch = static_cast<int>(in.count);
        rp.heads = static_cast<int>(count_heads);
        rp.rows = static_cast<int>(spec_.len);
        rp.dim = static_cast<int>(spec_.d_k);
        rp.lengths = in.lengths.data();
        rp.cos_table = rope_cos_.data();
        rp.sin_table = rope_sin_.data();
        k::apply_rope(rp, settings_.kernel.threads);
    }

    // Rotary embeddings in place on `rows` rows (row stride and head stride from `strides`) of
    // `count_heads` heads of one sequence of `length` tokens, row 0 at position `first_position`.
    void rotate_rows(float* data, const k::TensorStrides& strides, std::size_t count_heads, std::size_t rows,
                     std::int64_t first_position, std::int32_t length) const {
        if (rows == 0) return;
        k::RopeParams rp;
        rp.in = data;
        rp.in_strides = strides;
        rp.out = data;
        rp.out_strides = strides;
        rp.batch = 1;
        rp.heads = static_cast<int>(count_heads);
        rp.rows = static_cast<int>(rows);
        rp.dim = static_cast<int>(spec_.d_k);
        rp.lengths = &length;
        rp.row_offset = static_cast<int>(first_position);
        rp.cos_table = rope_cos_.data();
        rp.sin_table = rope_sin_.data();
        k::apply_rope(rp, settings_.kernel.threads);
    }

    void project_into(const PackedMatrix& w, const io::InputBlock& in, float* y) {
        k::ProjectionParams pp;
        pp.x = in.x.data();
        pp.x_row_stride = static_cast<std::ptrdiff_t>(spec_.d);
        pp.x_seq_stride = static_cast<std::ptrdiff_t>(spec_.len * spec_.d);
        pp.y = y;
        pp.y_row_stride = w.out;
        pp.y_seq_stride = static_cast<std::ptrdiff_t>(spec_.len) * w.out;
        pp.batch = static_cast<int>(in.count);
        pp.len = static_cast<int>(spec_.len);
        pp.in = w.in;
        pp.out = w.out;
        pp.lengths = in.lengths.data();
        pp.packed_w = w.packed.data();
        pp.bias = w.bias;
        run_projection(pp);
    }

    void run_projection(const k::ProjectionParams& pp) {
        const std::size_t bytes = k::projection_workspace_bytes(pp.in, isa_, settings_.kernel.threads);
        if (projection_workspace_.size() < bytes) projection_workspace_.resize(bytes);
        k::project(pp, isa_, settings_.kernel.threads, projection_workspace_.data(), projection_workspace_.size());
    }

    const io::InputSpec& spec_;
    AttentionSettings settings_;
    const io::OutputLayout& layout_;
    k::Isa isa_ = k::Isa::portable;
    bool projected_ = false;
    PackedMatrix w_q_, w_k_, w_v_, w_o_;
    std::vector<float> q_, k_, v_, attended_, output_, lse_, attention_f32_, sequence_lse_;
    std::vector<float> rope_cos_, rope_sin_;  // (L, d_k/2)
    std::vector<std::int32_t> group_rows_;
    std::vector<std::vector<unsigned char>> thread_workspaces_;
    std::vector<std::vector<float>> thread_lse_;
    // Packed sequences up to this long are computed one per thread (see compute_packed).
    static constexpr std::int32_t kShortSequence = 512;
    std::vector<std::uint16_t> attention_f16_;
    std::vector<unsigned char> workspace_, projection_workspace_;
};

StepComputer::StepComputer(const io::InputSpec& spec, const std::optional<io::ProjectionWeights>& weights,
                           const AttentionSettings& settings, const io::OutputLayout& layout)
    : impl_(std::make_unique<Impl>(spec, weights, settings, layout)) {}
StepComputer::~StepComputer() = default;
StepComputer::StepComputer(StepComputer&&) noexcept = default;

void StepComputer::compute(const io::InputBlock& in, io::OutputBlock& block, ComputeTally& tally) {
    impl_->compute(in, block, tally);
}

}  // namespace attnbatch::distributed
