#include "step_rows.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace attnbatch::distributed {

namespace {

struct Shape {
    std::size_t len, heads, kv_heads, dk, dv, maps_heads;
    bool split;  // Q, K, V input as (count, heads, rows, d)
    bool embeddings;  // Q = K = V = x
};

void check_length(std::int32_t length, std::int64_t len, std::int64_t sequence) {
    if (length < 0 || length > len) {
        throw std::invalid_argument("sequence " + std::to_string(sequence) + " has length " + std::to_string(length) +
                                    ", expected 0 <= length <= " + std::to_string(len));
    }
}

// Whole padded sequences: every range L query rows and L keys, in (count, L, ...) arrays.
void describe_padded(const Shape& s, const io::OutputLayout& layout, const io::InputBlock& in, StepRows& step) {
    const auto [w_first, w_last] = layout.weights_range(in.first, in.first + in.count);
    const std::size_t q_seq = s.len * s.heads * s.dk, k_seq = s.len * s.kv_heads * s.dk, v_seq = s.len * s.kv_heads * s.dv;
    const std::size_t x_seq = s.len * static_cast<std::size_t>(step.q.row);
    for (std::int64_t i = 0; i < in.count; ++i) {
        const auto index = static_cast<std::size_t>(i);
        RowRange r;
        r.sequence = i;
        r.length = in.lengths[index];
        r.rows = r.keys = static_cast<int>(s.len);
        r.query_rows = r.key_rows = r.length;
        r.maps = in.first + i >= w_first && in.first + i < w_last;
        if (!s.embeddings) {
            r.query_at = index * q_seq;
            r.key_at = index * k_seq;
            r.value_at = index * v_seq;
        } else {
            r.query_at = r.key_at = r.value_at = index * x_seq;
        }
        r.output_row = index * s.len;
        r.lse_at = index * s.heads * s.len;
        r.lse_head_stride = s.len;
        if (r.maps) r.map_at = static_cast<std::size_t>(in.first + i - w_first) * s.maps_heads * s.len * s.len;
        step.ranges.push_back(r);
    }
    step.output_rows = static_cast<std::size_t>(in.count) * s.len;
    step.lse_elements = static_cast<std::size_t>(in.count) * s.heads * s.len;
    step.map_elements = static_cast<std::size_t>(w_last - w_first) * s.maps_heads * s.len * s.len;
    step.sequences_done = in.count;
}

// Whole packed sequences: rows end to end, each range its length in query rows and keys (L keys
// where its maps are stored, whose rows are L wide).
void describe_packed(const Shape& s, const io::OutputLayout& layout, const io::InputBlock& in, StepRows& step) {
    const auto [w_first, w_last] = layout.weights_range(in.first, in.first + in.count);
    const auto total = static_cast<std::size_t>(in.offsets.back());
    std::size_t map_at = 0;
    for (std::int64_t i = 0; i < in.count; ++i) {
        const auto index = static_cast<std::size_t>(i);
        const auto row = static_cast<std::size_t>(in.offsets[index]);
        RowRange r;
        r.sequence = i;
        r.length = in.lengths[index];
        r.rows = r.query_rows = r.key_rows = r.length;
        r.maps = in.first + i >= w_first && in.first + i < w_last;
        r.keys = r.maps ? static_cast<int>(s.len) : r.length;
        r.query_at = row * static_cast<std::size_t>(step.q.row);
        r.key_at = row * static_cast<std::size_t>(step.k.row);
        r.value_at = row * static_cast<std::size_t>(step.v.row);
        r.output_row = row;
        r.lse_at = row;
        r.lse_head_stride = total;
        if (r.maps) {
            r.map_at = map_at;
            map_at += s.maps_heads * static_cast<std::size_t>(r.rows) * s.len;
        }
        if (r.rows > 0) step.ranges.push_back(r);
    }
    step.output_rows = total;
    step.lse_elements = s.heads * total;
    step.map_elements = map_at;
    step.sequences_done = in.count;
}

// Query rows [row_first, row_last) of one sequence with its first key_rows keys: q holds the
// query rows below the length, x or k and v the keys (io::InputReader::read_piece).
void describe_piece(const Shape& s, const io::OutputLayout& layout, const io::InputBlock& in, StepRows& step) {
    RowRange r;
    r.length = in.lengths[0];
    r.q0 = static_cast<int>(in.row_first);
    r.rows = static_cast<int>(in.row_last - in.row_first);
    r.query_rows = static_cast<int>(in.query_rows());
    r.keys = r.key_rows = static_cast<int>(in.key_rows);
    r.maps = layout.save_weights != io::SaveWeights::none && in.first >= layout.weights_first && in.first < layout.weights_end();
    if (s.embeddings) r.query_at = static_cast<std::size_t>(in.row_first) * static_cast<std::size_t>(step.q.row);
    if (s.split) {  // (heads, rows it holds, d)
        step.q.head = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r.query_rows) * s.dk);
        step.k.head = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r.keys) * s.dk);
        step.v.head = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r.keys) * s.dv);
    }
    r.lse_head_stride = static_cast<std::size_t>(r.rows);
    step.ranges.push_back(r);
    step.output_rows = static_cast<std::size_t>(r.rows);
    step.lse_elements = s.heads * static_cast<std::size_t>(r.rows);
    step.map_elements = r.maps ? s.maps_heads * static_cast<std::size_t>(r.rows) * s.len : 0;
    step.sequences_done = in.row_last == layout.rows_of(in.first) ? 1 : 0;
}

}  // namespace

StepRows describe_rows(const io::InputSpec& spec, const io::OutputLayout& layout, const io::InputBlock& in) {
    return describe_rows(spec, layout, in, StepData::of(in));
}

StepRows describe_rows(const io::InputSpec& spec, const io::OutputLayout& layout, const io::InputBlock& in,
                       const StepData& data) {
    Shape s;
    s.len = static_cast<std::size_t>(spec.len);
    s.heads = static_cast<std::size_t>(spec.heads);
    s.kv_heads = static_cast<std::size_t>(spec.kv_head_count());
    s.dk = static_cast<std::size_t>(spec.d_k);
    s.dv = static_cast<std::size_t>(spec.d_v);
    s.maps_heads = static_cast<std::size_t>(layout.weights_heads());
    s.split = spec.mode == io::InputMode::qkv && spec.layout == io::QkvLayout::split;
    s.embeddings = spec.mode == io::InputMode::embeddings;
    for (std::int64_t i = 0; i < in.count; ++i) check_length(in.lengths[static_cast<std::size_t>(i)], spec.len, in.first + i);

    StepRows step;
    const auto d = [](std::size_t v) { return static_cast<std::ptrdiff_t>(v); };
    if (spec.mode == io::InputMode::embeddings) {
        // The seed's softmax(X X^T / sqrt(d)) X: heads split along d, unless projected.
        step.q = step.k = step.v = OperandView{data.x, d(s.dk), d(static_cast<std::size_t>(spec.d))};
    } else if (s.split) {
        step.q = OperandView{data.q, d(s.len * s.dk), d(s.dk)};
        step.k = OperandView{data.k, d(s.len * s.dk), d(s.dk)};
        step.v = OperandView{data.v, d(s.len * s.dv), d(s.dv)};
    } else {
        step.q = OperandView{data.q, d(s.dk), d(s.heads * s.dk)};
        step.k = OperandView{data.k, d(s.dk), d(s.kv_heads * s.dk)};
        step.v = OperandView{data.v, d(s.dv), d(s.kv_heads * s.dv)};
    }
    if (in.piece()) describe_piece(s, layout, in, step);
    else if (!in.offsets.empty()) describe_packed(s, layout, in, step);
    else describe_padded(s, layout, in, step);
    return step;
}

}  // namespace attnbatch::distributed
