#include "attnbatch/distributed/step_computer.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif
#include "attnbatch/distributed/cpu_clocks.hpp"
#include "attnbatch/distributed/step_memory.hpp"
#include "attnbatch/kernels/projection.hpp"
#include "attnbatch/kernels/rope.hpp"
#include "attnbatch/kernels/threads.hpp"
#include "step_rows.hpp"

namespace attnbatch::distributed {

namespace k = attnbatch::kernels;

template <class T>
T* StepOutputs::Buffer<T>::reserve(std::size_t n) {
    if (n <= capacity_) return data_.get();
    // Grown without copying or clearing: each step writes all it uses.
    data_.reset();
    capacity_ = 0;
    data_.reset(static_cast<T*>(allocate_step_memory(n * sizeof(T))));
    capacity_ = n;
    return data_.get();
}

template class StepOutputs::Buffer<float>;
template class StepOutputs::Buffer<std::uint16_t>;

namespace {

// Rows of one projection's input, in spans of this many rows (a multiple of every backend's
// micro-tile height), the unit in which threads share a projection.
constexpr std::int32_t kSpanRows = 96;
// Scratch for the rows in flight of one chunk (projected Q, K, V and the attention output
// before w_o) when the caller gives no bound: about a core's L2, so that they are still in the
// cache when the kernel and w_o read them.
constexpr std::size_t kDefaultStagingBytes = std::size_t{1} << 20;
// Ranges of up to this many query rows go through whole chunks one thread each (no barrier
// between projection, attention and w_o), when there are enough chunks to share; longer ones
// through chunks that every thread works on, stage by stage.
constexpr int kShortSequence = 512;
// Short ranges are cut into about this many chunks per thread, so that the last ones even out.
constexpr std::size_t kChunksPerThread = 4;

struct PackedMatrix {
    std::vector<float> packed;
    std::vector<float> bias;  // empty: none
    int in = 0, out = 0;
    explicit operator bool() const noexcept { return !packed.empty(); }
};

// W [in, out] (and b [out]) packed for the projection kernel. Several matrices side by side
// (W_k | W_v) make one, their columns computed as they would be alone: a missing bias is
// zeros, and x + 0.0f == x for every sum the kernel can produce (an accumulation that starts
// at +0 never ends at -0).
PackedMatrix pack(std::initializer_list<std::pair<const std::vector<float>*, const std::vector<float>*>> parts, int in,
                  std::initializer_list<int> widths, k::Isa isa) {
    PackedMatrix m;
    m.in = in;
    for (int width : widths) m.out += width;
    std::vector<float> w(static_cast<std::size_t>(in) * static_cast<std::size_t>(m.out));
    bool any_bias = false;
    for (const auto& part : parts) any_bias = any_bias || !part.second->empty();
    if (any_bias) m.bias.assign(static_cast<std::size_t>(m.out), 0.0f);
    std::size_t column = 0;
    auto width = widths.begin();
    for (const auto& [matrix, bias] : parts) {
        const auto cols = static_cast<std::size_t>(*width++);
        for (std::size_t r = 0; r < static_cast<std::size_t>(in); ++r) {
            std::copy_n(matrix->data() + r * cols, cols, w.data() + r * static_cast<std::size_t>(m.out) + column);
        }
        if (!bias->empty()) std::copy_n(bias->data(), cols, m.bias.data() + column);
        column += cols;
    }
    m.packed.resize(k::projection_packed_floats(in, m.out, isa));
    k::pack_projection_weights(w.data(), in, m.out, m.packed.data(), isa);
    return m;
}

int thread_index() {
#if defined(_OPENMP)
    return omp_get_thread_num();
#else
    return 0;
#endif
}

}  // namespace

class StepComputer::Impl {
public:
    Impl(const io::InputSpec& spec, const std::optional<io::ProjectionWeights>& weights, const AttentionSettings& settings,
         const io::OutputLayout& layout, std::size_t staging_bytes)
        : spec_(spec), settings_(settings), layout_(layout),
          staging_bytes_(staging_bytes > 0 ? staging_bytes : kDefaultStagingBytes) {
        isa_ = k::resolve_isa(settings.kernel.isa);
        threads_ = k::resolved_threads(settings.kernel.threads);
        heads_ = static_cast<std::size_t>(spec.heads);
        kv_heads_ = static_cast<std::size_t>(spec.kv_head_count());
        dk_ = static_cast<std::size_t>(spec.d_k);
        dv_ = static_cast<std::size_t>(spec.d_v);
        q_width_ = heads_ * dk_;
        k_width_ = kv_heads_ * dk_;
        attended_width_ = heads_ * dv_;
        d_out_ = static_cast<std::size_t>(spec.d_out());
        if (weights) {
            const int d = static_cast<int>(spec.weights->d_in);
            const int kw = static_cast<int>(spec.weights->key_width()), vw = static_cast<int>(spec.weights->v_width);
            w_q_ = pack({{&weights->w_q, &weights->b_q}}, d, {static_cast<int>(spec.weights->qk_width)}, isa_);
            w_kv_ = pack({{&weights->w_k, &weights->b_k}, {&weights->w_v, &weights->b_v}}, d, {kw, vw}, isa_);
            if (spec.weights->has_w_o) {
                w_o_ = pack({{&weights->w_o, &weights->b_o}}, static_cast<int>(attended_width_), {static_cast<int>(d_out_)}, isa_);
            }
        }
        rope_ = settings.spec.rotary();
        if (rope_) {
            // Positions 0..L-1: a row's angle depends on its position in the sequence only.
            const std::size_t half = dk_ / 2;
            rope_cos_.resize(static_cast<std::size_t>(spec.len) * half);
            rope_sin_.resize(rope_cos_.size());
            k::rope_table(settings.spec.rope_theta, static_cast<int>(dk_), 0, static_cast<int>(spec.len), rope_cos_.data(),
                          rope_sin_.data());
        }
        // K staged (projected or rotated) in rows of K | V (projected) or K alone (rotated).
        kv_width_ = w_kv_ ? static_cast<std::size_t>(w_kv_.out) : k_width_;
        lanes_.resize(static_cast<std::size_t>(threads_));
    }

    void compute(const io::InputBlock& in, const StepData& data, StepOutputs& outputs, io::OutputBlock& block,
                 ComputeTally& tally) {
        const CpuSeconds start = team_cpu_times(threads_);
        compute_step(in, data, outputs, block, tally);
        const CpuSeconds used = team_cpu_times(threads_).since(start);
        tally.cpu += used.total;
        tally.cpu_system += used.system;
    }

private:
    void compute_step(const io::InputBlock& in, const StepData& data, StepOutputs& outputs, io::OutputBlock& block,
                      ComputeTally& tally) {
        const StepRows step = describe_rows(spec_, layout_, in, data);
        const bool f16 = layout_.weights_dtype == io::WeightsDtype::f16;
        Results results;
        results.output = outputs.output.reserve(step.output_rows * d_out_);
        results.lse = outputs.lse.reserve(step.lse_elements);
        if (step.map_elements > 0) {
            if (f16) results.maps_f16 = outputs.maps_f16.reserve(step.map_elements);
            else results.maps_f32 = outputs.maps_f32.reserve(step.map_elements);
        }
        // A piece's query rows past the length are not in its input: its Q is always copied.
        stage_q_ = w_q_ || rope_ || in.piece();
        stage_k_ = w_kv_ || rope_;
        cut_chunks(step);
        // A piece of the sequence whose keys and values the last step staged finds those rows
        // still in the scratch of the one lane that computed them: it stages only the rows past
        // them. A long sequence split into pieces over several steps of a rank (few sequences
        // per rank) so projects its keys and values once, not once per step.
        const bool one_piece = in.piece() && stage_k_ && chunks_.size() == 1 && step.ranges.size() == 1;
        carried_keys_ = one_piece && carry_.sequence == in.first ? std::min(carry_.key_rows, step.ranges[0].key_rows) : 0;
        carry_ = Carry{};  // until this step's are staged whole
        // Chunks of short ranges one per thread when there are enough to share, the others (and
        // all of them when not) with every thread. A row's bits depend on neither.
        std::size_t narrow = 0;
        for (const Chunk& c : chunks_) narrow += c.narrow ? 1 : 0;
        const bool spread = threads_ > 1 && narrow >= static_cast<std::size_t>(threads_);
        for (const Chunk& c : chunks_) {
            if (!spread || !c.narrow) compute_chunk(step, c, in, results, lanes_[0], threads_);
        }
        if (spread) {
            std::exception_ptr failure;
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads_)
#endif
            for (std::size_t j = 0; j < chunks_.size(); ++j) {
                if (!chunks_[j].narrow) continue;
                try {
                    compute_chunk(step, chunks_[j], in, results, lanes_[static_cast<std::size_t>(thread_index())], 1);
                } catch (...) {
#if defined(_OPENMP)
#pragma omp critical(attnbatch_step_failure)
#endif
                    if (!failure) failure = std::current_exception();
                }
            }
            if (failure) std::rethrow_exception(failure);
        }
        if (one_piece) carry_ = Carry{in.first, step.ranges[0].key_rows};
        count(step, tally);
        block.output = results.output;
        block.lse = results.lse;
        block.lengths = in.lengths.data();
        block.attention_f32 = results.maps_f32;
        block.attention_f16 = results.maps_f16;
    }

    struct Results {
        float* output = nullptr;
        float* lse = nullptr;
        float* maps_f32 = nullptr;
        std::uint16_t* maps_f16 = nullptr;
    };

    // Consecutive ranges computed together: ranges [first, last) of the step.
    struct Chunk {
        std::size_t first = 0, last = 0;
        bool narrow = false;  // all short: one thread does all of it
    };

    // Where a range's rows are in its chunk's scratch.
    struct Staged {
        std::size_t q_row = 0, kv_row = 0, attended_row = 0;
    };

    // One kernel call: ranges [first, first + count) of the chunk, alike and evenly spaced.
    struct Call {
        k::AttentionParams p;
        std::size_t first = 0, count = 0;
        bool lse_direct = true;  // else written to scratch and spread (packed layout, H > 1)
    };

    // What a chunk needs while it is computed: one per thread, reused by every chunk and step.
    struct Lane {
        std::vector<Staged> staged;
        std::vector<float> q, kv, attended;
        std::vector<k::ProjectionSpan> spans;
        std::vector<Call> calls;
        std::vector<unsigned char> workspace, projection_workspace;
        std::vector<float> lse;
    };

    std::size_t staged_bytes(const RowRange& r) const {
        std::size_t floats = 0;
        if (stage_q_) floats += static_cast<std::size_t>(r.rows) * q_width_;
        if (stage_k_) floats += static_cast<std::size_t>(r.keys) * kv_width_;
        if (w_o_) floats += static_cast<std::size_t>(r.rows) * attended_width_;
        return floats * sizeof(float);
    }

    static bool attended(const RowRange& r) { return r.query_rows > 0 && r.keys > 0; }
    static bool short_range(const RowRange& r) { return r.rows <= kShortSequence; }

    // Chunks of consecutive ranges, short or not, of at most staging_bytes_ of scratch (at least
    // one range); short ones also in enough chunks to share among the threads.
    void cut_chunks(const StepRows& step) {
        chunks_.clear();
        std::size_t short_ranges = 0;
        for (const RowRange& r : step.ranges) short_ranges += short_range(r) ? 1 : 0;
        const std::size_t share = static_cast<std::size_t>(threads_) * kChunksPerThread;
        const std::size_t most_short = threads_ > 1 ? std::max<std::size_t>(1, (short_ranges + share - 1) / share) : step.ranges.size();
        for (std::size_t first = 0; first < step.ranges.size();) {
            const bool narrow = short_range(step.ranges[first]);
            std::size_t last = first + 1, bytes = staged_bytes(step.ranges[first]);
            while (last < step.ranges.size() && short_range(step.ranges[last]) == narrow &&
                   bytes + staged_bytes(step.ranges[last]) <= staging_bytes_ && (!narrow || last - first < most_short)) {
                bytes += staged_bytes(step.ranges[last++]);
            }
            chunks_.push_back(Chunk{first, last, narrow});
            first = last;
        }
    }

    void compute_chunk(const StepRows& step, const Chunk& chunk, const io::InputBlock& in, const Results& results, Lane& lane,
                       int threads) {
        lane.staged.resize(chunk.last - chunk.first);
        std::size_t q_rows = 0, kv_rows = 0, attended_rows = 0;
        for (std::size_t i = chunk.first; i < chunk.last; ++i) {
            const RowRange& r = step.ranges[i];
            lane.staged[i - chunk.first] = Staged{q_rows, kv_rows, attended_rows};
            q_rows += static_cast<std::size_t>(r.rows);
            kv_rows += static_cast<std::size_t>(r.keys);
            attended_rows += static_cast<std::size_t>(r.rows);
        }
        if (stage_q_) lane.q.resize(std::max(lane.q.size(), q_rows * q_width_));
        if (stage_k_) lane.kv.resize(std::max(lane.kv.size(), kv_rows * kv_width_));
        if (w_o_) lane.attended.resize(std::max(lane.attended.size(), attended_rows * attended_width_));

        if (stage_q_) stage(true, step, chunk, lane, threads);
        if (stage_k_) stage(false, step, chunk, lane, threads);
        attend(step, chunk, in, results, lane, threads);
        if (w_o_) project_output(step, chunk, results, lane, threads);
    }

    // Q (queries) or K of the chunk's ranges into their scratch, rows of H*d_k or of K | V
    // (G*(d_k + d_v) when projected, else G*d_k): projected (the projection of K gives V beside
    // it), or copied from the input; rotated at the rows' positions; the rows reserved past the
    // length zero (the kernel reads whole micro-tiles of query rows, and no key row past them).
    void stage(bool queries, const StepRows& step, const Chunk& chunk, Lane& lane, int threads) {
        const PackedMatrix& w = queries ? w_q_ : w_kv_;
        const OperandView& view = queries ? step.q : step.k;
        const std::size_t width = queries ? q_width_ : kv_width_, count_heads = queries ? heads_ : kv_heads_;
        const auto valid = [queries](const RowRange& r) { return queries ? r.query_rows : r.key_rows; };
        const auto at = [queries](const RowRange& r) { return queries ? r.query_at : r.key_at; };
        const auto to_rows = [&](std::size_t i) { return queries ? q_rows(lane, i - chunk.first) : kv_rows(lane, i - chunk.first); };
        // Rows [0, kept) are there already: keys the step before staged (a continued piece).
        const int kept = queries ? 0 : carried_keys_;
        const auto input_from_kept = [&](const RowRange& r) { return view.base + at(r) + static_cast<std::ptrdiff_t>(kept) * view.row; };
        const auto staged_from_kept = [&](std::size_t i) { return to_rows(i) + static_cast<std::size_t>(kept) * width; };
        if (w) {
            lane.spans.clear();
            for (std::size_t i = chunk.first; i < chunk.last; ++i) {
                add_spans(lane, input_from_kept(step.ranges[i]), valid(step.ranges[i]) - kept, staged_from_kept(i), view.row, width);
            }
            project(w, lane, view.row, width, threads);
        }
        const k::TensorStrides staged{0, static_cast<std::ptrdiff_t>(dk_), static_cast<std::ptrdiff_t>(width)};
        for (std::size_t i = chunk.first; i < chunk.last; ++i) {
            const RowRange& r = step.ranges[i];
            float* to = to_rows(i);
            if (valid(r) > kept && (rope_ || !w)) {
                const float* from = w ? staged_from_kept(i) : input_from_kept(r);
                const k::TensorStrides from_strides = w ? staged : k::TensorStrides{0, view.head, view.row};
                const int rows = valid(r) - kept;
                if (rope_) rotate(from, from_strides, staged_from_kept(i), staged, count_heads, rows, (queries ? r.q0 : 0) + kept, threads);
                else copy_rows(from, from_strides, staged_from_kept(i), count_heads, dk_, rows);
            }
            const auto reserved = static_cast<std::size_t>(queries ? r.rows : r.keys);
            std::fill(to + static_cast<std::size_t>(valid(r)) * width, to + reserved * width, 0.0f);
        }
    }

    void attend(const StepRows& step, const Chunk& chunk, const io::InputBlock& in, const Results& results, Lane& lane,
                int threads) {
        lane.calls.clear();
        for (std::size_t i = chunk.first; i < chunk.last; ++i) {
            const RowRange& r = step.ranges[i];
            const std::size_t at = i - chunk.first;
            if (!attended(r)) {
                fill_unattended(r, out_rows(r, lane, at, results), results);
                continue;
            }
            Call call = call_for(step, r, lane, at, in, results);
            if (!lane.calls.empty() && extend(lane.calls.back(), call, step.ranges[chunk.first + lane.calls.back().first], r)) continue;
            call.first = at;
            lane.calls.push_back(call);
        }
        k::KernelOptions options = settings_.kernel;
        options.threads = threads;
        for (Call& call : lane.calls) {
            if (!call.lse_direct) {
                lane.lse.resize(heads_ * static_cast<std::size_t>(call.p.len_q));
                call.p.lse = lane.lse.data();
            }
            const std::size_t bytes = k::attention_workspace_bytes(call.p, options);
            if (lane.workspace.size() < bytes) lane.workspace.resize(bytes);
            k::attention_forward(call.p, options, lane.workspace.data(), lane.workspace.size());
            if (call.lse_direct) continue;
            const RowRange& r = step.ranges[chunk.first + call.first];
            const auto rows = static_cast<std::size_t>(r.rows);
            for (std::size_t h = 0; h < heads_; ++h) {
                std::memcpy(results.lse + r.lse_at + h * r.lse_head_stride, lane.lse.data() + h * rows, rows * sizeof(float));
            }
        }
        // The kernel's map rows are `keys` wide; the stored rows L wide, zero past the keys.
        const auto len = static_cast<std::size_t>(spec_.len);
        for (std::size_t i = chunk.first; i < chunk.last; ++i) {
            const RowRange& r = step.ranges[i];
            if (!r.maps || !attended(r) || static_cast<std::size_t>(r.keys) >= len) continue;
            const std::size_t rows = static_cast<std::size_t>(layout_.weights_heads()) * static_cast<std::size_t>(r.rows);
            if (results.maps_f16) widen_rows(results.maps_f16 + r.map_at, rows, static_cast<std::size_t>(r.keys), len);
            else widen_rows(results.maps_f32 + r.map_at, rows, static_cast<std::size_t>(r.keys), len);
        }
    }

    // Where the kernel reads an operand of a range: in the scratch (rows of `width`, heads
    // `head` apart) when staged, else in the input at element `at`.
    static std::pair<const float*, k::TensorStrides> operand(const float* staged, std::size_t width, std::size_t head,
                                                             const OperandView& input, std::size_t at) {
        if (staged) return {staged, k::TensorStrides{0, static_cast<std::ptrdiff_t>(head), static_cast<std::ptrdiff_t>(width)}};
        return {input.base + at, k::TensorStrides{0, input.head, input.row}};
    }

    // The kernel's parameters for range r alone.
    Call call_for(const StepRows& step, const RowRange& r, Lane& lane, std::size_t at, const io::InputBlock& in, const Results& results) {
        Call call;
        k::AttentionParams& p = call.p;
        p.batch = 1;
        p.heads = static_cast<int>(heads_);
        p.kv_heads = static_cast<int>(kv_heads_);
        p.len_q = r.rows;
        p.q_offset = r.q0;
        p.len_k = r.keys;
        p.dim_k = static_cast<int>(dk_);
        p.dim_v = static_cast<int>(dv_);
        settings_.spec.apply_to(p);
        std::tie(p.q, p.q_strides) = operand(stage_q_ ? q_rows(lane, at) : nullptr, q_width_, dk_, step.q, r.query_at);
        std::tie(p.k, p.k_strides) = operand(stage_k_ ? kv_rows(lane, at) : nullptr, kv_width_, dk_, step.k, r.key_at);
        std::tie(p.v, p.v_strides) = operand(w_kv_ ? kv_rows(lane, at) + k_width_ : nullptr, kv_width_, dv_, step.v, r.value_at);
        p.out = out_rows(r, lane, at, results);
        p.out_strides = k::TensorStrides{0, static_cast<std::ptrdiff_t>(dv_), static_cast<std::ptrdiff_t>(attended_width_)};
        p.lengths = in.lengths.data() + r.sequence;
        call.lse_direct = heads_ == 1 || r.lse_head_stride == static_cast<std::size_t>(r.rows);
        p.lse = call.lse_direct ? results.lse + r.lse_at : nullptr;
        if (r.maps) {
            p.weights_mode = layout_.save_weights == io::SaveWeights::mean ? k::WeightsMode::mean_over_heads : k::WeightsMode::all;
            p.weights_type = results.maps_f16 ? k::WeightsType::f16 : k::WeightsType::f32;
            p.weights = results.maps_f16 ? static_cast<void*>(results.maps_f16 + r.map_at) : static_cast<void*>(results.maps_f32 + r.map_at);
        }
        call.count = 1;
        return call;
    }

    // Takes `next` (range r, following `last` of `call`) into `call` when it is the next
    // sequence, of the same shape, placed one sequence stride further in every array.
    bool extend(Call& call, const Call& next, const RowRange& call_first, const RowRange& r) const {
        k::AttentionParams& p = call.p;
        const k::AttentionParams& n = next.p;
        if (r.sequence != call_first.sequence + static_cast<std::int64_t>(call.count) || n.len_q != p.len_q ||
            n.q_offset != p.q_offset || n.len_k != p.len_k || n.weights_mode != p.weights_mode || !call.lse_direct ||
            !next.lse_direct) {
            return false;
        }
        const auto stride = [&](const auto* a, const auto* b) { return static_cast<std::ptrdiff_t>(b - a) / static_cast<std::ptrdiff_t>(call.count); };
        const auto evenly = [&](const auto* a, const auto* b, std::ptrdiff_t seq) {
            return b - a == seq * static_cast<std::ptrdiff_t>(call.count);
        };
        std::ptrdiff_t q = p.q_strides.seq, kk = p.k_strides.seq, v = p.v_strides.seq, out = p.out_strides.seq;
        if (call.count == 1) {
            q = stride(p.q, n.q);
            kk = stride(p.k, n.k);
            v = stride(p.v, n.v);
            out = stride(p.out, n.out);
            if (q <= 0 || kk <= 0 || v <= 0 || out <= 0) return false;
        }
        const auto lse_seq = static_cast<std::ptrdiff_t>(heads_) * p.len_q;
        const auto map_seq = static_cast<std::ptrdiff_t>(layout_.weights_heads()) * p.len_q * p.len_k;
        if (!evenly(p.q, n.q, q) || !evenly(p.k, n.k, kk) || !evenly(p.v, n.v, v) || !evenly(p.out, n.out, out) ||
            !evenly(p.lse, n.lse, lse_seq)) {
            return false;
        }
        if (p.weights_mode != k::WeightsMode::none) {
            const bool f16 = p.weights_type == k::WeightsType::f16;
            const bool even = f16 ? evenly(static_cast<const std::uint16_t*>(p.weights), static_cast<const std::uint16_t*>(n.weights), map_seq)
                                  : evenly(static_cast<const float*>(p.weights), static_cast<const float*>(n.weights), map_seq);
            if (!even) return false;
        }
        p.q_strides.seq = q;
        p.k_strides.seq = kk;
        p.v_strides.seq = v;
        p.out_strides.seq = out;
        p.batch += 1;
        call.count += 1;
        return true;
    }

    // A range the kernel cannot take (no valid query rows, or no keys): what it would write.
    void fill_unattended(const RowRange& r, float* out, const Results& results) const {
        const auto rows = static_cast<std::size_t>(r.rows);
        for (std::size_t row = 0; row < rows; ++row) std::fill_n(out + row * attended_width_, attended_width_, 0.0f);
        for (std::size_t h = 0; h < heads_; ++h) {
            std::fill_n(results.lse + r.lse_at + h * r.lse_head_stride, rows, -std::numeric_limits<float>::infinity());
        }
        if (!r.maps) return;
        const std::size_t elements = static_cast<std::size_t>(layout_.weights_heads()) * rows * static_cast<std::size_t>(spec_.len);
        if (results.maps_f16) std::fill_n(results.maps_f16 + r.map_at, elements, std::uint16_t{0});
        else std::fill_n(results.maps_f32 + r.map_at, elements, 0.0f);
    }

    // Y = attention output W_o + b_o for the valid rows; rows past the length zero.
    void project_output(const StepRows& step, const Chunk& chunk, const Results& results, Lane& lane, int threads) {
        lane.spans.clear();
        for (std::size_t i = chunk.first; i < chunk.last; ++i) {
            const RowRange& r = step.ranges[i];
            float* y = results.output + r.output_row * d_out_;
            add_spans(lane, out_rows(r, lane, i - chunk.first, results), r.query_rows, y, static_cast<std::ptrdiff_t>(attended_width_), d_out_);
            std::fill(y + static_cast<std::size_t>(r.query_rows) * d_out_, y + static_cast<std::size_t>(r.rows) * d_out_, 0.0f);
        }
        project(w_o_, lane, static_cast<std::ptrdiff_t>(attended_width_), d_out_, threads);
    }

    static void add_spans(Lane& lane, const float* x, int rows, float* y, std::ptrdiff_t x_row, std::size_t y_row) {
        for (std::int32_t r0 = 0; r0 < rows; r0 += kSpanRows) {
            lane.spans.push_back(k::ProjectionSpan{x + r0 * x_row, y + static_cast<std::size_t>(r0) * y_row, std::min(kSpanRows, rows - r0)});
        }
    }

    void project(const PackedMatrix& w, Lane& lane, std::ptrdiff_t x_row, std::size_t y_row, int threads) const {
        if (lane.spans.empty()) return;
        k::ProjectionParams pp;
        pp.spans = lane.spans.data();
        pp.span_count = lane.spans.size();
        pp.x_row_stride = x_row;
        pp.y_row_stride = static_cast<std::ptrdiff_t>(y_row);
        pp.in = w.in;
        pp.out = w.out;
        pp.packed_w = w.packed.data();
        pp.bias = w.bias.empty() ? nullptr : w.bias.data();
        const std::size_t bytes = k::projection_workspace_bytes(w.in, isa_, threads);
        if (lane.projection_workspace.size() < bytes) lane.projection_workspace.resize(bytes);
        k::project(pp, isa_, threads, lane.projection_workspace.data(), lane.projection_workspace.size());
    }

    // Rotary embeddings of `rows` rows of `count_heads` heads, row 0 at `first_position` (the
    // table is indexed by position, so a piece rotates its rows as the whole sequence does).
    void rotate(const float* from, const k::TensorStrides& from_strides, float* to, const k::TensorStrides& to_strides,
                std::size_t count_heads, int rows, int first_position, int threads) const {
        k::RopeParams rp;
        rp.in = from;
        rp.in_strides = from_strides;
        rp.out = to;
        rp.out_strides = to_strides;
        rp.batch = 1;
        rp.heads = static_cast<int>(count_heads);
        rp.rows = rows;
        rp.dim = static_cast<int>(dk_);
        rp.row_offset = first_position;
        rp.cos_table = rope_cos_.data();
        rp.sin_table = rope_sin_.data();
        k::apply_rope(rp, threads);
    }

    // `rows` rows of `count_heads` heads of width d into rows of count_heads * d.
    static void copy_rows(const float* from, const k::TensorStrides& from_strides, float* to, std::size_t count_heads,
                          std::size_t d, int rows) {
        for (std::size_t row = 0; row < static_cast<std::size_t>(rows); ++row) {
            for (std::size_t h = 0; h < count_heads; ++h) {
                std::memcpy(to + (row * count_heads + h) * d,
                            from + static_cast<std::ptrdiff_t>(h) * from_strides.head + static_cast<std::ptrdiff_t>(row) * from_strides.row,
                            d * sizeof(float));
            }
        }
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

    // The scratch rows of the chunk's range `at`.
    float* q_rows(Lane& lane, std::size_t at) const { return lane.q.data() + lane.staged[at].q_row * q_width_; }
    float* kv_rows(Lane& lane, std::size_t at) const { return lane.kv.data() + lane.staged[at].kv_row * kv_width_; }
    // Where the kernel writes range r's attention output: the scratch before w_o, else /output.
    float* out_rows(const RowRange& r, Lane& lane, std::size_t at, const Results& results) const {
        return w_o_ ? lane.attended.data() + lane.staged[at].attended_row * attended_width_ : results.output + r.output_row * d_out_;
    }

    void count(const StepRows& step, ComputeTally& tally) const {
        const double per_pair = 2.0 * static_cast<double>(heads_ * (dk_ + dv_));
        for (const RowRange& r : step.ranges) {
            const double q0 = r.q0, q1 = q0 + r.query_rows;
            const double pairs = settings_.spec.causal ? (q1 * (q1 + 1) - q0 * (q0 + 1)) / 2 : static_cast<double>(r.query_rows) * r.length;
            tally.attention_flops += per_pair * pairs;
            if (w_q_) {
                const double keys_projected = static_cast<double>(r.key_rows - carried_keys_);  // a step has carried keys only with one range
                tally.projection_flops += 2.0 * w_q_.in * (static_cast<double>(r.query_rows) * w_q_.out + keys_projected * w_kv_.out);
            }
            if (w_o_) tally.projection_flops += 2.0 * r.query_rows * w_o_.in * static_cast<double>(w_o_.out);
            tally.tokens += r.query_rows;
        }
        tally.sequences += step.sequences_done;
    }

    const io::InputSpec& spec_;
    AttentionSettings settings_;
    const io::OutputLayout& layout_;
    std::size_t staging_bytes_;
    k::Isa isa_ = k::Isa::portable;
    int threads_ = 1;
    std::size_t heads_ = 0, kv_heads_ = 0, dk_ = 0, dv_ = 0;
    std::size_t q_width_ = 0, k_width_ = 0, kv_width_ = 0, attended_width_ = 0, d_out_ = 0;
    PackedMatrix w_q_, w_kv_, w_o_;  // packed once, read by every step
    bool rope_ = false;
    std::vector<float> rope_cos_, rope_sin_;  // (L, d_k/2)

    // Per step: which operands pass through the scratch, and the chunks.
    bool stage_q_ = false, stage_k_ = false;
    std::vector<Chunk> chunks_;
    std::vector<Lane> lanes_;  // one per thread
    // The keys (and values) staged in lanes_[0] by the last step when it was one piece: its
    // sequence (-1: none) and the key rows staged, rows [0, key_rows) of that lane's scratch.
    struct Carry {
        std::int64_t sequence = -1;
        int key_rows = 0;
    };
    Carry carry_;
    int carried_keys_ = 0;  // of this step's key rows, those staged by the step before
};

StepComputer::StepComputer(const io::InputSpec& spec, const std::optional<io::ProjectionWeights>& weights,
                           const AttentionSettings& settings, const io::OutputLayout& layout, std::size_t staging_bytes)
    : impl_(std::make_unique<Impl>(spec, weights, settings, layout, staging_bytes)) {}
StepComputer::~StepComputer() = default;
StepComputer::StepComputer(StepComputer&&) noexcept = default;

void StepComputer::compute(const io::InputBlock& in, StepOutputs& outputs, io::OutputBlock& block, ComputeTally& tally) {
    impl_->compute(in, StepData::of(in), outputs, block, tally);
}

void StepComputer::compute(const io::InputBlock& in, const StepData& data, StepOutputs& outputs, io::OutputBlock& block,
                           ComputeTally& tally) {
    impl_->compute(in, data, outputs, block, tally);
}

}  // namespace attnbatch::distributed
