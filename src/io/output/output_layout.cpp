// The names of the attention-map settings, and which sequences have stored maps.
#include "attnbatch/io/output/output_layout.hpp"

#include <algorithm>
#include <numeric>

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

SequenceChunks sequence_chunks(const OutputLayout& layout) {
    if (layout.packed || layout.n <= 0 || layout.len <= 0 || layout.d_out <= 0) return {};
    // A chunk cut inside a sequence (chunk_shape's leading extent 1) starts with every sequence.
    const auto output_every = static_cast<std::int64_t>(chunk_shape(padded_output_dims(layout), 4, layout.chunk_bytes)[0]);
    if (layout.weights_count() <= 0) return {0, output_every};
    const auto maps_every =
        static_cast<std::int64_t>(chunk_shape(padded_maps_dims(layout), layout.weights_element_bytes(), layout.chunk_bytes)[0]);
    // The maps hold most of the bytes: their grid, which with maps from a chunk bound on (the
    // usual A = 0) meets the output's every lcm sequences.
    if (layout.weights_first % maps_every == 0) return {0, std::lcm(output_every, maps_every)};
    return {layout.weights_first, maps_every};
}

}  // namespace attnbatch::io
