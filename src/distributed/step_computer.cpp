#include "attnbatch/distributed/step_computer.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

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
    std::vector<float> q_, k_, v_, attended_, output_, lse_, attention_f32_;
    std::vector<float> rope_cos_, rope_sin_;  // (L, d_k/2)
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
