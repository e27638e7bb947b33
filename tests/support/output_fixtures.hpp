// Output files for the io tests: a small layout, provenance, and whole-run buffers whose values
// derive from their position, so that any misplaced row shows.
#pragma once

#include "attnbatch/io/output/output_file.hpp"
#include "attnbatch/kernels/half.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace attnbatch::testing {

inline io::OutputLayout small_layout() {
    io::OutputLayout layout;
    layout.n = 4;
    layout.len = 3;
    layout.heads = 2;
    layout.d_out = 5;
    return layout;
}

// N sequences of 32 rows of 32 floats (4 KiB of /output each) and two heads of 32 x 32 maps
// (8 KiB), in chunks of 8 KiB: two sequences per /output chunk, one per /attention chunk, every
// chunk whole pages, as the writes around HDF5 need (src/io/output/direct_chunks.hpp).
inline io::OutputLayout page_chunked_layout(std::int64_t n) {
    io::OutputLayout layout;
    layout.n = n;
    layout.len = 32;
    layout.heads = 2;
    layout.d_out = 32;
    layout.chunk_bytes = 8192;
    return layout;
}

inline io::Provenance provenance() {
    io::Provenance p;
    p.version = "0.1.0";
    p.input_file = "in.h5";
    p.input_dataset = "/embeddings";
    p.heads = 2;
    p.attention.causal = true;
    p.attention.scale = 0.5;
    p.attention.rope_theta = 10000.0;
    p.attention.precision = kernels::Precision::bf16;
    p.ranks = 3;
    p.threads = 8;
    p.io_mode = "parallel";
    p.config = "[run]\ninput = in.h5\nheads = 2\n";
    return p;
}

// Whole-run buffers for a layout, with values derived from the sequence index so any
// misplaced row shows.
struct RunData {
    std::vector<float> output, lse, attention;
    std::vector<std::uint16_t> attention_half;
    std::vector<std::int32_t> lengths;
    explicit RunData(const io::OutputLayout& layout) {
        const auto n = static_cast<std::size_t>(layout.n);
        const auto len = static_cast<std::size_t>(layout.len);
        output.resize(n * len * static_cast<std::size_t>(layout.d_out));
        for (std::size_t i = 0; i < output.size(); ++i) output[i] = static_cast<float>(i) * 0.5f;
        lse.resize(n * static_cast<std::size_t>(layout.heads) * len);
        for (std::size_t i = 0; i < lse.size(); ++i) lse[i] = -static_cast<float>(i);
        const std::size_t per_sequence = static_cast<std::size_t>(layout.weights_heads()) * len * len;
        attention.resize(n * per_sequence);
        for (std::size_t i = 0; i < attention.size(); ++i) attention[i] = static_cast<float>(i % 64) / 64.0f;
        for (const float value : attention) attention_half.push_back(kernels::float_to_half(value));
        for (std::size_t s = 0; s < n; ++s) lengths.push_back(static_cast<std::int32_t>(s % (len + 1)));
    }
    // Sequences [first, last) of the run; attention from the weights range.
    io::OutputBlock block(const io::OutputLayout& layout, std::int64_t first) const {
        const auto len = static_cast<std::size_t>(layout.len);
        const auto f = static_cast<std::size_t>(first);
        const auto w = static_cast<std::size_t>(layout.weights_range(first, layout.n).first);
        const std::size_t per_sequence = static_cast<std::size_t>(layout.weights_heads()) * len * len;
        io::OutputBlock b;
        b.output = output.data() + f * len * static_cast<std::size_t>(layout.d_out);
        b.lse = lse.data() + f * static_cast<std::size_t>(layout.heads) * len;
        b.lengths = lengths.data() + f;
        b.attention_f32 = attention.data() + w * per_sequence;
        b.attention_f16 = attention_half.data() + w * per_sequence;
        return b;
    }
};

inline void write_all(io::OutputFile& out, const RunData& data, std::int64_t step) {
    const io::OutputLayout& layout = out.layout();
    for (std::int64_t first = 0; first < layout.n; first += step) {
        out.write_block(first, std::min(first + step, layout.n), data.block(layout, first));
    }
}

}  // namespace attnbatch::testing
