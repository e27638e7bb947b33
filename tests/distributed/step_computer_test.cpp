// The step compute (StepComputer): projections, rotary embeddings, grouped-query attention,
// the output projection and the attention maps against a double-precision pipeline; and the
// same bytes whatever the layout of the step (padded, packed, one sequence per step, pieces of
// query rows), the scratch bound (one sequence per chunk or all at once) and the thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnbatch/distributed/step_computer.hpp"
#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/io/output/output_file.hpp"
#include "attnbatch/kernels/half.hpp"
#include "attnbatch/kernels/rope.hpp"
#include "support/kernel_test_support.hpp"

namespace attnbatch::distributed {
namespace {

constexpr int kLen = 24, kHeads = 4, kHeadWidth = 8;
const std::vector<std::int32_t> kLengths{24, 0, 5, 17, 1, 24, 11};

struct Case {
    bool projected;
    bool rope;
    bool causal;
    io::SaveWeights maps;
    io::WeightsDtype dtype;
    int kv_heads;
    std::string name;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Sequences with ragged lengths (an empty one among them), embeddings of width d, maps stored
// for sequences [2, 6) only, weights as generate writes them (w_o of 12 columns).
struct Problem {
    io::InputSpec spec;
    io::OutputLayout layout;
    std::optional<io::ProjectionWeights> weights;
    AttentionSettings settings;
    std::vector<float> x;  // (N, L, d), zero past each length

    explicit Problem(const Case& c) {
        const int d = c.projected ? 20 : kHeads * kHeadWidth;
        spec.path = "in-memory.h5";
        spec.mode = io::InputMode::embeddings;
        spec.n = static_cast<std::int64_t>(kLengths.size());
        spec.len = kLen;
        spec.d = d;
        spec.heads = kHeads;
        spec.kv_heads = c.kv_heads;
        spec.d_k = spec.d_v = kHeadWidth;
        std::mt19937 rng(17);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        if (c.projected) {
            io::WeightsSpec w;
            w.d_in = d;
            w.qk_width = kHeads * kHeadWidth;
            w.k_width = c.kv_heads * kHeadWidth;
            w.v_width = c.kv_heads * kHeadWidth;
            w.has_w_o = true;
            w.d_out = 12;
            w.has_b_q = w.has_b_v = w.has_b_o = true;  // no b_k: K | V packed together mix bias and none
            spec.weights = w;
            io::ProjectionWeights& pw = weights.emplace();
            const auto fill = [&](std::vector<float>& v, std::int64_t n, double fan_in) {
                v.resize(static_cast<std::size_t>(n));
                for (float& e : v) e = normal(rng) * static_cast<float>(1.0 / std::sqrt(fan_in));
            };
            fill(pw.w_q, d * w.qk_width, d);
            fill(pw.w_k, d * w.k_width, d);
            fill(pw.w_v, d * w.v_width, d);
            fill(pw.w_o, kHeads * kHeadWidth * w.d_out, kHeads * kHeadWidth);  // (H*d_v, d_out): every query head's output
            fill(pw.b_q, w.qk_width, d);
            fill(pw.b_v, w.v_width, d);
            fill(pw.b_o, w.d_out, kHeads * kHeadWidth);
        }
        layout = io::output_layout_for(spec);
        layout.save_weights = c.maps;
        layout.weights_dtype = c.dtype;
        layout.weights_first = 2;
        layout.weights_last = 6;
        settings.spec.causal = c.causal;
        settings.spec = settings.spec.resolved(kHeadWidth);
        settings.spec.rope_theta = c.rope ? 100.0 : 0.0;
        settings.kernel.threads = 1;
        x.assign(kLengths.size() * kLen * static_cast<std::size_t>(d), 0.0f);
        for (std::size_t s = 0; s < kLengths.size(); ++s) {
            for (std::size_t i = 0; i < static_cast<std::size_t>(kLengths[s]) * static_cast<std::size_t>(d); ++i) {
                x[s * kLen * static_cast<std::size_t>(d) + i] = normal(rng);
            }
        }
    }

    std::size_t d() const { return static_cast<std::size_t>(spec.d); }
    std::size_t d_out() const { return static_cast<std::size_t>(spec.d_out()); }
    std::size_t maps_heads() const { return static_cast<std::size_t>(layout.weights_heads()); }
    bool has_maps(std::size_t s) const {
        return layout.save_weights != io::SaveWeights::none && static_cast<std::int64_t>(s) >= layout.weights_first &&
               static_cast<std::int64_t>(s) < layout.weights_end();
    }
};

// Per sequence, its rows of every result as a step of any layout hands them out.
struct Sequence {
    std::vector<float> output;  // (rows, D_out)
    std::vector<float> lse;     // (H, rows)
    std::vector<float> maps;    // (H_w, rows, L), f16 widened
    std::vector<std::uint16_t> maps_f16;
};

// A padded step of sequences [first, last), each sequence's results taken from the block.
std::vector<Sequence> padded_step(const Problem& p, StepComputer& computer, StepOutputs& outputs, std::size_t first,
                                  std::size_t last, ComputeTally* counted = nullptr) {
    io::InputBlock in;
    in.first = static_cast<std::int64_t>(first);
    in.count = static_cast<std::int64_t>(last - first);
    in.x.assign(p.x.begin() + static_cast<std::ptrdiff_t>(first * kLen * p.d()),
                p.x.begin() + static_cast<std::ptrdiff_t>(last * kLen * p.d()));
    in.lengths.assign(kLengths.begin() + static_cast<std::ptrdiff_t>(first), kLengths.begin() + static_cast<std::ptrdiff_t>(last));
    io::OutputBlock block;
    ComputeTally tally;
    computer.compute(in, outputs, block, tally);
    EXPECT_EQ(tally.sequences, static_cast<std::int64_t>(last - first));
    if (counted) *counted = tally;
    std::vector<Sequence> result;
    std::size_t map_index = 0;
    for (std::size_t s = first; s < last; ++s) {
        Sequence q;
        const std::size_t i = s - first;
        q.output.assign(block.output + i * kLen * p.d_out(), block.output + (i + 1) * kLen * p.d_out());
        q.lse.assign(block.lse + i * kHeads * kLen, block.lse + (i + 1) * kHeads * kLen);
        if (p.has_maps(s)) {
            const std::size_t n = p.maps_heads() * kLen * kLen;
            if (block.attention_f16) q.maps_f16.assign(block.attention_f16 + map_index * n, block.attention_f16 + (map_index + 1) * n);
            else q.maps.assign(block.attention_f32 + map_index * n, block.attention_f32 + (map_index + 1) * n);
            ++map_index;
        }
        result.push_back(q);
    }
    return result;
}

// The packed layout: every sequence's valid rows end to end, results (rows, ...) per sequence.
std::vector<Sequence> packed_step(const Problem& p, StepComputer& computer, StepOutputs& outputs) {
    io::InputBlock in;
    in.first = 0;
    in.count = static_cast<std::int64_t>(kLengths.size());
    in.lengths = kLengths;
    in.offsets.assign(1, 0);
    for (std::size_t s = 0; s < kLengths.size(); ++s) {
        const auto n = static_cast<std::size_t>(kLengths[s]);
        in.x.insert(in.x.end(), p.x.begin() + static_cast<std::ptrdiff_t>(s * kLen * p.d()),
                    p.x.begin() + static_cast<std::ptrdiff_t>((s * kLen + n) * p.d()));
        in.offsets.push_back(in.offsets.back() + kLengths[s]);
    }
    const auto total = static_cast<std::size_t>(in.offsets.back());
    io::OutputBlock block;
    ComputeTally tally;
    computer.compute(in, outputs, block, tally);
    std::vector<Sequence> result;
    std::size_t map_at = 0;
    for (std::size_t s = 0; s < kLengths.size(); ++s) {
        Sequence q;
        const auto row = static_cast<std::size_t>(in.offsets[s]), n = static_cast<std::size_t>(kLengths[s]);
        q.output.assign(block.output + row * p.d_out(), block.output + (row + n) * p.d_out());
        for (std::size_t h = 0; h < kHeads; ++h) q.lse.insert(q.lse.end(), block.lse + h * total + row, block.lse + h * total + row + n);
        if (p.has_maps(s)) {
            const std::size_t count = p.maps_heads() * n * kLen;
            if (count > 0 && block.attention_f16) q.maps_f16.assign(block.attention_f16 + map_at, block.attention_f16 + map_at + count);
            else if (count > 0) q.maps.assign(block.attention_f32 + map_at, block.attention_f32 + map_at + count);
            map_at += count;
        }
        result.push_back(q);
    }
    return result;
}

// Sequence s in pieces of `rows` query rows (the last may reach past L's length), each with the
// keys the plan gives it: causal, those up to its last row; else all. The pieces run first to
// last, or last to first (`backward`), and with `between` >= 0 each piece is followed by the
// same piece of sequence `between` (whose results are dropped). Rows joined back in order;
// the steps' tallies of sequence s added to `tally` when given.
Sequence piece_steps(const Problem& p, StepComputer& computer, StepOutputs& outputs, std::size_t s, int rows,
                     bool backward = false, int between = -1, ComputeTally* tally = nullptr) {
    Sequence q;
    q.output.assign(kLen * p.d_out(), 0.0f);
    q.lse.assign(static_cast<std::size_t>(kHeads) * kLen, 0.0f);
    const std::size_t map_rows = p.maps_heads() * kLen * kLen;
    std::vector<float> maps(p.has_maps(s) ? map_rows : 0);
    std::vector<std::uint16_t> maps_f16(p.has_maps(s) ? map_rows : 0);
    bool half = false;
    std::vector<int> starts;
    for (int r0 = 0; r0 < kLen; r0 += rows) starts.push_back(r0);
    if (backward) std::reverse(starts.begin(), starts.end());
    const auto piece = [&](std::size_t sequence, int r0, io::OutputBlock& block, ComputeTally& counted) {
        const int r1 = std::min(kLen, r0 + rows);
        const std::int32_t length = kLengths[sequence];
        io::InputBlock in;
        in.first = static_cast<std::int64_t>(sequence);
        in.count = 1;
        in.lengths = {length};
        in.row_first = r0;
        in.row_last = r1;
        in.key_rows = p.settings.spec.causal ? std::min(r1, length) : length;
        in.x.assign(p.x.begin() + static_cast<std::ptrdiff_t>(sequence * kLen * p.d()),
                    p.x.begin() + static_cast<std::ptrdiff_t>((sequence * kLen + static_cast<std::size_t>(in.key_rows)) * p.d()));
        computer.compute(in, outputs, block, counted);
        EXPECT_EQ(counted.sequences, r1 == kLen ? 1 : 0);
    };
    for (const int r0 : starts) {
        io::OutputBlock block;
        ComputeTally counted;
        piece(s, r0, block, counted);
        if (tally) {
            tally->attention_flops += counted.attention_flops;
            tally->projection_flops += counted.projection_flops;
            tally->tokens += counted.tokens;
        }
        const auto n = static_cast<std::size_t>(std::min(kLen, r0 + rows) - r0);
        const auto row = static_cast<std::size_t>(r0);
        std::copy_n(block.output, n * p.d_out(), q.output.begin() + static_cast<std::ptrdiff_t>(row * p.d_out()));
        for (std::size_t h = 0; h < kHeads; ++h) std::copy_n(block.lse + h * n, n, q.lse.begin() + static_cast<std::ptrdiff_t>(h * kLen + row));
        if (p.has_maps(s)) {
            half = block.attention_f16 != nullptr;
            for (std::size_t h = 0; h < p.maps_heads(); ++h) {
                const auto to = static_cast<std::ptrdiff_t>((h * kLen + row) * kLen);
                if (half) std::copy_n(block.attention_f16 + h * n * kLen, n * kLen, maps_f16.begin() + to);
                else std::copy_n(block.attention_f32 + h * n * kLen, n * kLen, maps.begin() + to);
            }
        }
        if (between >= 0) {  // another sequence's piece in between: its step stages other keys
            io::OutputBlock other;
            ComputeTally ignored;
            piece(static_cast<std::size_t>(between), r0, other, ignored);
        }
    }
    if (p.has_maps(s)) {
        if (half) q.maps_f16 = maps_f16;
        else q.maps = maps;
    }
    return q;
}

// The first `rows` rows of a padded sequence's results (the packed layout keeps no others).
Sequence first_rows(const Problem& p, const Sequence& q, std::size_t rows) {
    Sequence r;
    r.output.assign(q.output.begin(), q.output.begin() + static_cast<std::ptrdiff_t>(rows * p.d_out()));
    for (std::size_t h = 0; h < kHeads; ++h) {
        r.lse.insert(r.lse.end(), q.lse.begin() + static_cast<std::ptrdiff_t>(h * kLen),
                     q.lse.begin() + static_cast<std::ptrdiff_t>(h * kLen + rows));
    }
    for (std::size_t h = 0; h < p.maps_heads() && (!q.maps.empty() || !q.maps_f16.empty()); ++h) {
        const auto from = static_cast<std::ptrdiff_t>(h * kLen * kLen), to = from + static_cast<std::ptrdiff_t>(rows * kLen);
        if (!q.maps.empty()) r.maps.insert(r.maps.end(), q.maps.begin() + from, q.maps.begin() + to);
        else r.maps_f16.insert(r.maps_f16.end(), q.maps_f16.begin() + from, q.maps_f16.begin() + to);
    }
    return r;
}

void expect_same(const Sequence& a, const Sequence& b, const std::string& what) {
    EXPECT_TRUE(test::bit_identical(a.output, b.output)) << what << ": output";
    EXPECT_TRUE(test::bit_identical(a.lse, b.lse)) << what << ": lse";
    EXPECT_TRUE(test::bit_identical(a.maps, b.maps)) << what << ": maps";
    EXPECT_TRUE(test::bit_identical(a.maps_f16, b.maps_f16)) << what << ": maps (f16)";
}

// ------------------------------------------------------------------------ a plain pipeline

// Projections, rotary embeddings, attention and w_o in plain loops in T (double: the
// reference; float: the yardstick of the tolerance), for sequence s: output (L, D_out), lse
// (H, L) and maps (H_w, L, L), rows past the length zero (lse -inf).
template <typename T>
Sequence plain_pipeline(const Problem& p, std::size_t s, std::vector<double>* output64 = nullptr,
                        std::vector<double>* lse64 = nullptr, std::vector<double>* maps64 = nullptr) {
    const std::size_t n = static_cast<std::size_t>(kLengths[s]), d = p.d(), dk = kHeadWidth;
    const std::size_t groups = static_cast<std::size_t>(p.spec.kv_head_count()), per_group = kHeads / groups;
    const std::size_t qw = kHeads * dk, kw = groups * dk;
    const float* x = p.x.data() + s * kLen * d;
    std::vector<T> q(n * qw), k(n * kw), v(n * kw);
    const auto project = [&](const std::vector<float>& w, const std::vector<float>& b, std::size_t cols, std::vector<T>& y) {
        for (std::size_t i = 0; i < n; ++i) {
            for (std::size_t c = 0; c < cols; ++c) {
                T sum = b.empty() ? T(0) : T(b[c]);
                for (std::size_t j = 0; j < d; ++j) sum += T(x[i * d + j]) * T(w[j * cols + c]);
                y[i * cols + c] = sum;
            }
        }
    };
    if (p.weights) {
        project(p.weights->w_q, p.weights->b_q, qw, q);
        project(p.weights->w_k, p.weights->b_k, kw, k);
        project(p.weights->w_v, p.weights->b_v, kw, v);
    } else {
        for (std::size_t i = 0; i < n * qw; ++i) q[i] = k[i] = v[i] = T(x[i]);
    }
    if (p.settings.spec.rope_theta > 0) {
        for (auto* m : {&q, &k}) {
            const std::size_t width = m == &q ? qw : kw;
            for (std::size_t i = 0; i < n; ++i) {
                for (std::size_t h = 0; h < width / dk; ++h) {
                    std::vector<double> row(dk);
                    for (std::size_t c = 0; c < dk; ++c) row[c] = static_cast<double>((*m)[i * width + h * dk + c]);
                    kernels::apply_rope_f64(p.settings.spec.rope_theta, static_cast<int>(dk), static_cast<std::int64_t>(i), row.data());
                    for (std::size_t c = 0; c < dk; ++c) (*m)[i * width + h * dk + c] = T(row[c]);
                }
            }
        }
    }
    const std::size_t hw = p.maps_heads();
    std::vector<T> attended(kLen * qw, T(0)), lse(kHeads * kLen, -std::numeric_limits<T>::infinity()), maps(hw * kLen * kLen, T(0));
    for (std::size_t h = 0; h < kHeads; ++h) {
        const std::size_t g = h / per_group;
        for (std::size_t i = 0; i < n; ++i) {
            const std::size_t keys = p.settings.spec.causal ? i + 1 : n;
            std::vector<T> logit(keys);
            T top = -std::numeric_limits<T>::infinity();
            for (std::size_t j = 0; j < keys; ++j) {
                T dot = 0;
                for (std::size_t c = 0; c < dk; ++c) dot += q[i * qw + h * dk + c] * k[j * kw + g * dk + c];
                logit[j] = dot * T(p.settings.spec.scale);
                top = std::max(top, logit[j]);
            }
            T sum = 0;
            for (std::size_t j = 0; j < keys; ++j) sum += (logit[j] = std::exp(logit[j] - top));
            for (std::size_t j = 0; j < keys; ++j) {
                const T w = logit[j] / sum;
                for (std::size_t c = 0; c < dk; ++c) attended[i * qw + h * dk + c] += w * v[j * kw + g * dk + c];
                if (hw == kHeads) maps[(h * kLen + i) * kLen + j] = w;
                else maps[i * kLen + j] += w / T(kHeads);
            }
            lse[h * kLen + i] = top + std::log(sum);
        }
    }
    const std::size_t d_out = p.d_out();
    std::vector<T> out(kLen * d_out, T(0));
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t c = 0; c < d_out; ++c) {
            if (!p.weights || !p.spec.weights->has_w_o) {
                out[i * d_out + c] = attended[i * qw + c];
                continue;
            }
            T sum = T(p.weights->b_o[c]);
            for (std::size_t j = 0; j < qw; ++j) sum += attended[i * qw + j] * T(p.weights->w_o[j * d_out + c]);
            out[i * d_out + c] = sum;
        }
    }
    if (output64) output64->assign(out.begin(), out.end());
    if (lse64) lse64->assign(lse.begin(), lse.end());
    if (maps64) maps64->assign(maps.begin(), maps.end());
    Sequence r;
    r.output.assign(out.begin(), out.end());
    r.lse.assign(lse.begin(), lse.end());
    r.maps.assign(maps.begin(), maps.end());
    return r;
}

std::vector<float> widen(const std::vector<std::uint16_t>& half) {
    std::vector<float> f(half.size());
    for (std::size_t i = 0; i < half.size(); ++i) f[i] = kernels::half_to_float(half[i]);
    return f;
}

class StepComputerTest : public ::testing::TestWithParam<Case> {};

TEST_P(StepComputerTest, MatchesDoublePrecisionPipeline) {
    const Problem p(GetParam());
    StepComputer computer(p.spec, p.weights, p.settings, p.layout);
    StepOutputs outputs;
    const std::vector<Sequence> got = padded_step(p, computer, outputs, 0, kLengths.size());
    std::vector<float> got_out, naive_out, got_lse, naive_lse, got_maps, naive_maps;
    std::vector<double> ref_out, ref_lse, ref_maps;
    for (std::size_t s = 0; s < kLengths.size(); ++s) {
        std::vector<double> out64, lse64, maps64;
        plain_pipeline<double>(p, s, &out64, &lse64, &maps64);
        const Sequence naive = plain_pipeline<float>(p, s);
        const auto n = static_cast<std::size_t>(kLengths[s]);
        for (std::size_t i = 0; i < kLen * p.d_out(); ++i) {
            if (i / p.d_out() >= n) {
                ASSERT_EQ(got[s].output[i], 0.0f) << "sequence " << s << ": a row past the length is not zero";
                continue;
            }
            got_out.push_back(got[s].output[i]);
            naive_out.push_back(naive.output[i]);
            ref_out.push_back(out64[i]);
        }
        for (std::size_t i = 0; i < got[s].lse.size(); ++i) {
            if (i % kLen >= n) {
                ASSERT_EQ(got[s].lse[i], -std::numeric_limits<float>::infinity()) << "sequence " << s;
                continue;
            }
            got_lse.push_back(got[s].lse[i]);
            naive_lse.push_back(naive.lse[i]);
            ref_lse.push_back(lse64[i]);
        }
        if (!p.has_maps(s)) continue;
        const std::vector<float> maps = got[s].maps_f16.empty() ? got[s].maps : widen(got[s].maps_f16);
        ASSERT_EQ(maps.size(), maps64.size());
        for (std::size_t i = 0; i < maps.size(); ++i) {
            // f16 maps: rounded once from float, half an f16 ulp of the value (2^-11 relative).
            const double allowed = got[s].maps_f16.empty() ? 0.0 : std::ldexp(std::fabs(maps64[i]), -11) + 6e-8;
            if (allowed > 0) {
                ASSERT_LE(std::fabs(maps[i] - maps64[i]), allowed + 1e-6) << "sequence " << s << " map element " << i;
                continue;
            }
            got_maps.push_back(maps[i]);
            naive_maps.push_back(naive.maps[i]);
            ref_maps.push_back(maps64[i]);
        }
    }
    test::expect_close_to_reference("output", got_out, naive_out, ref_out);
    test::expect_close_to_reference("lse", got_lse, naive_lse, ref_lse);
    if (!ref_maps.empty()) test::expect_close_to_reference("maps", got_maps, naive_maps, ref_maps);
}

TEST_P(StepComputerTest, SameBytesForEveryLayoutScratchBoundAndThreadCount) {
    Problem p(GetParam());
    StepComputer whole(p.spec, p.weights, p.settings, p.layout);
    StepOutputs outputs;
    const std::vector<Sequence> reference = padded_step(p, whole, outputs, 0, kLengths.size());

    // One range per chunk (a bound of one byte), on two threads.
    AttentionSettings two = p.settings;
    two.kernel.threads = 2;
    StepComputer narrow(p.spec, p.weights, two, p.layout, 1);
    const std::vector<Sequence> chunked = padded_step(p, narrow, outputs, 0, kLengths.size());
    for (std::size_t s = 0; s < kLengths.size(); ++s) expect_same(reference[s], chunked[s], "one range per chunk, sequence " + std::to_string(s));

    // One sequence per step, alternating between two outputs of one computer.
    StepOutputs other;
    for (std::size_t s = 0; s < kLengths.size(); ++s) {
        const std::vector<Sequence> alone = padded_step(p, whole, s % 2 ? other : outputs, s, s + 1);
        expect_same(reference[s], alone[0], "sequence " + std::to_string(s) + " alone");
    }

    // Pieces of 5 and of 7 query rows.
    for (int rows : {5, 7}) {
        for (std::size_t s = 0; s < kLengths.size(); ++s) {
            expect_same(reference[s], piece_steps(p, narrow, outputs, s, rows),
                        "pieces of " + std::to_string(rows) + " rows, sequence " + std::to_string(s));
        }
    }

    // The packed layout: each sequence's valid rows.
    io::OutputLayout packed_layout = p.layout;
    packed_layout.packed = true;
    auto offsets = std::make_shared<std::vector<std::int64_t>>(1, 0);
    for (const std::int32_t n : kLengths) offsets->push_back(offsets->back() + n);
    packed_layout.offsets = offsets;
    for (const AttentionSettings& settings : {p.settings, two}) {
        StepComputer packed(p.spec, p.weights, settings, packed_layout);
        const std::vector<Sequence> got = packed_step(p, packed, outputs);
        for (std::size_t s = 0; s < kLengths.size(); ++s) {
            expect_same(first_rows(p, reference[s], static_cast<std::size_t>(kLengths[s])), got[s],
                        "packed, " + std::to_string(settings.kernel.threads) + " threads, sequence " + std::to_string(s));
        }
    }
}

// A long sequence in pieces over several steps (few sequences per rank) stages its keys and
// values once: a piece continuing the sequence of the step before reuses the rows that step
// projected (and rotated), and stages only those past them. Same bytes in every order, and the
// projection FLOPs of the whole sequence when its pieces follow each other, forward or back.
TEST_P(StepComputerTest, PiecesOfOneSequenceStageItsKeysOnce) {
    const Problem p(GetParam());
    StepComputer whole(p.spec, p.weights, p.settings, p.layout);
    StepOutputs outputs;
    for (std::size_t s = 0; s < kLengths.size(); ++s) {
        ComputeTally alone;
        const Sequence reference = padded_step(p, whole, outputs, s, s + 1, &alone)[0];
        for (const bool backward : {false, true}) {
            StepComputer pieces(p.spec, p.weights, p.settings, p.layout);  // nothing staged before
            ComputeTally counted;
            const std::string what = std::string(backward ? "last to first" : "first to last") + ", sequence " + std::to_string(s);
            expect_same(reference, piece_steps(p, pieces, outputs, s, 5, backward, -1, &counted), "pieces of 5 rows, " + what);
            EXPECT_EQ(counted.projection_flops, alone.projection_flops) << what << ": keys projected more than once";
            EXPECT_EQ(counted.tokens, alone.tokens) << what;
        }
        const std::size_t other = (s + 3) % kLengths.size();
        StepComputer pieces(p.spec, p.weights, p.settings, p.layout);
        ComputeTally interleaved;
        expect_same(reference, piece_steps(p, pieces, outputs, s, 7, false, static_cast<int>(other), &interleaved),
                    "pieces of 7 rows with sequence " + std::to_string(other) + "'s in between, sequence " + std::to_string(s));
        if (p.weights && kLengths[s] > 7 && kLengths[other] > 0) {
            EXPECT_GT(interleaved.projection_flops, alone.projection_flops)
                << "sequence " << s << ": pieces with another sequence's in between cannot reuse keys";
        }
    }
}

TEST_P(StepComputerTest, OneComputerTwoOutputsKeepEachStepsResults) {
    const Problem p(GetParam());
    StepComputer computer(p.spec, p.weights, p.settings, p.layout);
    StepOutputs first, second;
    io::InputBlock in;
    in.first = 0;
    in.count = 3;
    in.x.assign(p.x.begin(), p.x.begin() + static_cast<std::ptrdiff_t>(3 * kLen * p.d()));
    in.lengths.assign(kLengths.begin(), kLengths.begin() + 3);
    io::OutputBlock a, b;
    ComputeTally tally;
    computer.compute(in, first, a, tally);
    const std::vector<float> kept(a.output, a.output + 3 * kLen * p.d_out());
    io::InputBlock later = in;
    later.first = 3;
    later.x.assign(p.x.begin() + static_cast<std::ptrdiff_t>(3 * kLen * p.d()), p.x.begin() + static_cast<std::ptrdiff_t>(6 * kLen * p.d()));
    later.lengths.assign(kLengths.begin() + 3, kLengths.begin() + 6);
    computer.compute(later, second, b, tally);
    EXPECT_TRUE(test::bit_identical(kept, std::vector<float>(a.output, a.output + 3 * kLen * p.d_out())))
        << "the second step wrote into the first step's outputs";
    EXPECT_NE(a.output, b.output);
    EXPECT_EQ(tally.sequences, 6);
    EXPECT_EQ(tally.tokens, kLengths[0] + kLengths[1] + kLengths[2] + kLengths[3] + kLengths[4] + kLengths[5]);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, StepComputerTest,
    ::testing::Values(Case{true, true, true, io::SaveWeights::all, io::WeightsDtype::f32, 2, "projected_rope_causal_gqa_maps"},
                      Case{true, false, false, io::SaveWeights::mean, io::WeightsDtype::f16, 4, "projected_mean_f16"},
                      Case{false, true, false, io::SaveWeights::all, io::WeightsDtype::f16, 4, "embeddings_rope_maps_f16"},
                      Case{false, false, true, io::SaveWeights::none, io::WeightsDtype::f32, 4, "embeddings_causal"}),
    [](const ::testing::TestParamInfo<Case>& param) { return param.param.name; });

TEST(StepComputerInput, LengthBeyondTheSequenceIsRefused) {
    Problem p(Case{true, false, false, io::SaveWeights::none, io::WeightsDtype::f32, 4, "bad"});
    StepComputer computer(p.spec, p.weights, p.settings, p.layout);
    StepOutputs outputs;
    io::InputBlock in;
    in.first = 0;
    in.count = 1;
    in.x.assign(p.x.begin(), p.x.begin() + static_cast<std::ptrdiff_t>(kLen * p.d()));
    in.lengths = {kLen + 5};
    io::OutputBlock block;
    ComputeTally tally;
    try {
        computer.compute(in, outputs, block, tally);
        FAIL() << "a length of L + 5 was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("expected 0 <= length <= 24"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace attnbatch::distributed
