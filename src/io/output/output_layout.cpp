// The names of the attention-map settings, which sequences have stored maps, and what makes a
// layout that an output file can be created with.
#include "attnbatch/io/output/output_layout.hpp"

#include "attnbatch/error.hpp"

#include <algorithm>
#include <numeric>
#include <string>

namespace attnbatch::io {

const char* name_of(SaveWeights save) {
    switch (save) {
        case SaveWeights::none: return "none";
        case SaveWeights::all: return "all";
        case SaveWeights::mean: return "mean";
    }
    return "?";
}

const char* name_of(WeightsDtype type) { return type == WeightsDtype::f16 ? "f16" : "f32"; }

void check_output_layout(const OutputLayout& layout, const std::string& path) {
    const auto fail = [&](const std::string& what) { throw Error(exit_usage, path + ": cannot create the output: " + what); };
    if (layout.n < 1 || layout.len < 1 || layout.heads < 1 || layout.d_out < 1) {
        fail("N, L, H and D_out must be at least 1 (got N = " + std::to_string(layout.n) + ", L = " +
             std::to_string(layout.len) + ", H = " + std::to_string(layout.heads) + ", D_out = " +
             std::to_string(layout.d_out) + ")");
    }
    if (layout.packed && (!layout.offsets || static_cast<std::int64_t>(layout.offsets->size()) != layout.n + 1 ||
                          layout.offsets->front() != 0)) {
        fail("the packed layout needs N + 1 = " + std::to_string(layout.n + 1) + " offsets from 0");
    }
    if (layout.packed && layout.tokens() < 1) {  // its datasets' chunks would be empty
        fail("sequences [" + std::to_string(layout.first_sequence) + ", " + std::to_string(layout.first_sequence + layout.n) +
             ") all have length 0, and a packed output needs at least one row; hint: choose a --sequences block that "
             "holds a token, or leave out the empty sequences");
    }
    if (layout.gzip_level < 0 || layout.gzip_level > 9) {
        fail("--compression gzip level " + std::to_string(layout.gzip_level) + ", expected 1-9");
    }
    if (layout.save_weights != SaveWeights::none) {
        const std::int64_t first = layout.weights_first;
        const std::int64_t last = layout.weights_end();
        if (first < 0 || first >= last || last > layout.n) {
            fail("--weights-seqs " + std::to_string(first) + ":" + std::to_string(last) +
                 ", expected 0 <= A < B <= N = " + std::to_string(layout.n));
        }
    }
}

std::pair<std::int64_t, std::int64_t> OutputLayout::weights_range(std::int64_t first, std::int64_t last) const noexcept {
    if (save_weights == SaveWeights::none) return {first, first};
    const std::int64_t begin = std::max(first, weights_first);
    const std::int64_t end = std::min(last, weights_end());
    return begin < end ? std::pair{begin, end} : std::pair{begin, begin};
}

Dims padded_output_dims(const OutputLayout& layout) {
    return {static_cast<std::uint64_t>(layout.n), static_cast<std::uint64_t>(layout.len), static_cast<std::uint64_t>(layout.d_out)};
}

Dims padded_maps_dims(const OutputLayout& layout) {
    const auto len = static_cast<std::uint64_t>(layout.len);
    return {static_cast<std::uint64_t>(layout.weights_count()), static_cast<std::uint64_t>(layout.weights_heads()), len, len};
}

Dims output_chunk_shape(const OutputLayout& layout, const Dims& dims, std::size_t element_size, BatchAxis batch) {
    Dims chunk = chunk_shape(dims, element_size, layout.chunk_bytes);
    if (layout.chunk_sequences <= 0 || batch.index >= chunk.size() || layout.n <= 0) return chunk;
    std::uint64_t most = static_cast<std::uint64_t>(layout.chunk_sequences);
    if (batch.token_rows) {  // the sequences' share of the rows, rounded up
        const auto tokens = static_cast<std::uint64_t>(std::max<std::int64_t>(1, layout.tokens()));
        most = (tokens * most + static_cast<std::uint64_t>(layout.n) - 1) / static_cast<std::uint64_t>(layout.n);
    }
    chunk[batch.index] = std::clamp<std::uint64_t>(most, 1, chunk[batch.index]);
    return chunk;
}

SequenceChunks sequence_chunks(const OutputLayout& layout) {
    if (layout.packed || layout.n <= 0 || layout.len <= 0 || layout.d_out <= 0) return {};
    // A chunk cut inside a sequence (chunk_shape's leading extent 1) starts with every sequence.
    const auto output_every = static_cast<std::int64_t>(output_chunk_shape(layout, padded_output_dims(layout), 4, {})[0]);
    if (layout.weights_count() <= 0) return {0, output_every};
    const auto maps_every = static_cast<std::int64_t>(
        output_chunk_shape(layout, padded_maps_dims(layout), layout.weights_element_bytes(), {})[0]);
    // The maps hold most of the bytes: their grid, which with maps from a chunk bound on (the
    // usual A = 0) meets the output's every lcm sequences.
    if (layout.weights_first % maps_every == 0) return {0, std::lcm(output_every, maps_every)};
    return {layout.weights_first, maps_every};
}

}  // namespace attnbatch::io
