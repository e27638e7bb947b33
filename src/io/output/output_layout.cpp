// The names of the attention-map settings, and which sequences have stored maps.
#include "attnbatch/io/output/output_layout.hpp"

#include <algorithm>

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

}  // namespace attnbatch::io
