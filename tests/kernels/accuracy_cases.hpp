// The accuracy grid of the kernel tests (accuracy_test.cpp runs it on the fp32 variants,
// bf16_accuracy_test.cpp on each bf16 variant): every L below 1000 with every d_k, causal or
// not, ragged or dense, each layout, and long, extreme-logit and cross-attention shapes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "support/kernel_test_support.hpp"

namespace attnbatch::test {

struct AccuracyCase {
    std::string name;
    Shape shape;
    std::uint32_t seed;
};

// GoogleTest prints parameters in listings and failure messages: the name, not raw bytes.
inline void PrintTo(const AccuracyCase& c, std::ostream* os) { *os << c.name; }

// Lengths 0, 1, L and something in between in one batch: padded keys, empty sequences and
// single-token sequences go through the same tiles as full ones.
inline std::vector<std::int32_t> ragged(int len) { return {len, 0, 1, std::max(1, 2 * len / 3)}; }

// d_v differs from d_k on both sides and across vector widths.
inline int other_dim_v(int dim_k) {
    switch (dim_k) {
        case 1: return 4;
        case 3: return 1;
        case 64: return 80;
        case 80: return 17;
        default: return 200;
    }
}

// Each d_k gets a layout, so the grid also runs every stride pattern.
inline Layout layout_for(int dim_k) {
    switch (dim_k) {
        case 3:
        case 80: return Layout::heads_packed;
        case 1:
        case 128: return Layout::padded;
        default: return Layout::contiguous;
    }
}

inline const char* fill_name(Fill fill) {
    switch (fill) {
        case Fill::uniform: return "uniform";
        case Fill::large_logits: return "large_logits";
        case Fill::offset_logits: return "offset_logits";
        case Fill::equal_keys: return "equal_keys";
    }
    return "?";
}

// FNV-1a of the case name: a case keeps its data when others are added or reordered.
inline std::uint32_t seed_from(const std::string& name) {
    std::uint32_t h = 2166136261u;
    for (unsigned char ch : name) h = (h ^ ch) * 16777619u;
    return h;
}

inline AccuracyCase make_case(int len_q, int len_k, int dim_k, int dim_v, bool causal, bool with_lengths,
                       Fill fill, int batch_without_lengths, int heads) {
    AccuracyCase c;
    c.shape.len_q = len_q;
    c.shape.len_k = len_k;
    c.shape.dim_k = dim_k;
    c.shape.dim_v = dim_v;
    c.shape.causal = causal;
    c.shape.heads = heads;
    c.shape.layout = layout_for(dim_k);
    c.shape.fill = fill;
    if (with_lengths) {
        c.shape.lengths = ragged(std::min(len_q, len_k));
        c.shape.batch = static_cast<int>(c.shape.lengths.size());
    } else {
        c.shape.batch = batch_without_lengths;
    }
    c.name = "Lq" + std::to_string(len_q) + "_Lk" + std::to_string(len_k) + "_dk" + std::to_string(dim_k) + "_dv" +
             std::to_string(dim_v) + (causal ? "_causal" : "_full") + (with_lengths ? "_ragged" : "_dense") + "_" +
             layout_name(c.shape.layout) + "_" + fill_name(fill);
    c.seed = seed_from(c.name);
    return c;
}

inline constexpr int kDims[] = {1, 3, 64, 80, 128};

// Every L below 1000 with every d_k, causal or not, d_v equal or not (the d_v != d_k half also
// carries ragged lengths). Multiples of the tile sizes and one either side are in the list.
inline std::vector<AccuracyCase> grid_cases() {
    std::vector<AccuracyCase> cases;
    for (int len : {1, 2, 3, 7, 63, 64, 65, 129})
        for (int dk : kDims)
            for (bool causal : {false, true})
                for (bool same_dv : {true, false})
                    cases.push_back(make_case(len, len, dk, same_dv ? dk : other_dim_v(dk), causal, !same_dv,
                                              Fill::uniform, 2, 2));
    return cases;
}

// L = 1000 is where time goes (the fp64 reference is O(L^2 d) per head): one head and a
// ragged batch, each d_k causal and not, d_v alternating.
inline std::vector<AccuracyCase> long_cases() {
    std::vector<AccuracyCase> cases;
    for (int i = 0; i < 5; ++i) {
        const int dk = kDims[i];
        for (bool causal : {false, true}) {
            cases.push_back(make_case(1000, 1000, dk, i % 2 ? other_dim_v(dk) : dk, causal, true, Fill::uniform, 1, 1));
        }
    }
    return cases;
}

// Logits of +-1e4, spread widely (nearly one-hot rows) or offset by +-1e4 with an O(1) spread
// (exp overflows, or every term underflows, unless the row max is subtracted), and rows of
// exactly equal logits (uniform weights, ties in every max).
inline std::vector<AccuracyCase> extreme_cases() {
    std::vector<AccuracyCase> cases;
    const int shapes[][2] = {{1, 64}, {2, 1}, {7, 3}, {65, 64}, {129, 128}, {1000, 80}};
    for (Fill fill : {Fill::large_logits, Fill::offset_logits, Fill::equal_keys})
        for (const auto& s : shapes)
            for (bool causal : {false, true}) {
                const int heads = s[0] == 1000 ? 1 : 2;
                cases.push_back(make_case(s[0], s[0], s[1], s[1], causal, true, fill, 1, heads));
            }
    return cases;
}

// Cross attention shapes: more queries than keys and the reverse.
inline std::vector<AccuracyCase> cross_cases() {
    std::vector<AccuracyCase> cases;
    for (bool causal : {false, true})
        for (bool with_lengths : {false, true}) {
            cases.push_back(make_case(7, 65, 64, 80, causal, with_lengths, Fill::uniform, 2, 3));
            cases.push_back(make_case(129, 3, 3, 64, causal, with_lengths, Fill::uniform, 2, 3));
        }
    return cases;
}

}  // namespace attnbatch::test
