#include "kernel_test_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <ostream>
#include <random>
#include <sstream>

#include "amx_permission.hpp"
#include "attnbatch/kernels/half.hpp"

namespace attnbatch::test {

std::vector<Variant> all_variants() {
    std::vector<Variant> variants;
    for (kn::Isa isa : kn::built_isas()) {
        const kn::Precision precision = kn::isa_precision(isa);
        const std::string name = std::string("blocked_") + kn::isa_name(isa);
        variants.push_back({kn::KernelKind::blocked, isa, name, precision, false});
        if (precision == kn::Precision::bf16) variants.push_back({kn::KernelKind::blocked, isa, name + "_amx", precision, true});
    }
    variants.push_back({kn::KernelKind::reference, kn::Isa::best, "reference"});
    return variants;
}

bool variant_available(const Variant& variant) {
    if (!kn::isa_available(variant.isa)) return false;
    if (!variant.amx) return true;
    // Tiles run only where the CPU has them and this process was granted them.
    return cli::amx_permitted() && kn::matrix_unit(options_for(variant)) == "amx-bf16";
}

std::vector<Variant> available_variants() {
    std::vector<Variant> variants;
    for (const Variant& v : all_variants()) {
        if (variant_available(v)) variants.push_back(v);
    }
    return variants;
}

void PrintTo(const Variant& variant, std::ostream* os) { *os << variant.name; }

std::string variant_test_name(const ::testing::TestParamInfo<Variant>& info) { return info.param.name; }

const char* layout_name(Layout layout) {
    switch (layout) {
        case Layout::contiguous: return "contiguous";
        case Layout::heads_packed: return "heads_packed";
        case Layout::padded: return "padded";
    }
    return "?";
}

std::string Shape::describe() const {
    std::ostringstream s;
    s << "B=" << batch << " H=" << heads << " Lq=" << len_q << " Lk=" << len_k << " d_k=" << dim_k
      << " d_v=" << dim_v << (causal ? " causal" : "") << " layout=" << layout_name(layout) << " lengths={";
    for (std::size_t i = 0; i < lengths.size(); ++i) s << (i ? "," : "") << lengths[i];
    s << "}";
    return s.str();
}

namespace {

kn::TensorStrides strides_for(Layout layout, int heads, int rows, int cols) {
    const std::ptrdiff_t h = heads, l = rows, d = cols;
    switch (layout) {
        case Layout::contiguous: return {h * l * d, l * d, d};
        case Layout::heads_packed: return {l * h * d, d, h * d};
        case Layout::padded: {
            const std::ptrdiff_t row = d + 3, head = l * row + 5;
            return {h * head + 7, head, row};
        }
    }
    return {};
}

std::size_t span_of(const kn::TensorStrides& s, int batch, int heads, int rows, int cols) {
    if (batch == 0) return 0;
    return static_cast<std::size_t>((batch - 1) * s.seq + (heads - 1) * s.head + (rows - 1) * s.row + cols);
}

// Portable across standard libraries, unlike std::uniform_real_distribution.
float uniform(std::mt19937& rng, float lo, float hi) {
    const float unit = static_cast<float>(rng() >> 8) * 0x1p-24f;  // [0, 1)
    return lo + (hi - lo) * unit;
}

int valid_tokens(const Shape& s, int b, int limit) {
    return s.lengths.empty() ? limit : std::min<int>(s.lengths[static_cast<std::size_t>(b)], limit);
}

// Fills the (B, H, rows, cols) view of `data` through `st`; `value(b, h, row, col)` gives each entry.
template <typename F>
void fill_tensor(std::vector<float>& data, const kn::TensorStrides& st, const Shape& s, int rows,
                 int cols, F value) {
    for (int b = 0; b < s.batch; ++b)
        for (int h = 0; h < s.heads; ++h)
            for (int r = 0; r < rows; ++r)
                for (int c = 0; c < cols; ++c)
                    data[static_cast<std::size_t>(b * st.seq + h * st.head + r * st.row + c)] = value(b, h, r, c);
}

}  // namespace

kn::AttentionParams Problem::params() const {
    kn::AttentionParams p;
    p.q = q.data();
    p.q_strides = q_strides;
    p.k = k.data();
    p.k_strides = k_strides;
    p.v = v.data();
    p.v_strides = v_strides;
    p.out_strides = out_strides;
    p.batch = shape.batch;
    p.heads = shape.heads;
    p.len_q = shape.len_q;
    p.len_k = shape.len_k;
    p.dim_k = shape.dim_k;
    p.dim_v = shape.dim_v;
    p.scale = scale;
    p.causal = shape.causal;
    p.lengths = shape.lengths.empty() ? nullptr : shape.lengths.data();
    return p;
}

Problem make_problem(const Shape& s, std::uint32_t seed) {
    Problem pr;
    pr.shape = s;
    pr.scale = 1.0f / std::sqrt(static_cast<float>(s.dim_k));
    pr.q_strides = strides_for(s.layout, s.heads, s.len_q, s.dim_k);
    pr.k_strides = strides_for(s.layout, s.heads, s.len_k, s.dim_k);
    pr.v_strides = strides_for(s.layout, s.heads, s.len_k, s.dim_v);
    pr.out_strides = strides_for(s.layout, s.heads, s.len_q, s.dim_v);
    pr.out_span = span_of(pr.out_strides, s.batch, s.heads, s.len_q, s.dim_v);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    pr.q.assign(span_of(pr.q_strides, s.batch, s.heads, s.len_q, s.dim_k), nan);
    pr.k.assign(span_of(pr.k_strides, s.batch, s.heads, s.len_k, s.dim_k), nan);
    pr.v.assign(span_of(pr.v_strides, s.batch, s.heads, s.len_k, s.dim_v), nan);

    std::mt19937 rng(seed);
    // Uniform [-a, a) entries: with scale 1/sqrt(d_k) the logits have standard deviation a^2/3,
    // so a = sqrt(3e4) puts them at +-1e4 whatever d_k is.
    const float qk_range = s.fill == Fill::large_logits ? std::sqrt(3.0e4f) : 2.0f;
    auto padding = [&s](int b, int token, int limit) {
        return s.poison_padding && token >= valid_tokens(s, b, limit);
    };
    // Every entry draws its random value, padding included, so that poisoning the padding
    // leaves the valid tokens exactly as they are without it.
    // offset_logits: q = a (1 + e u), k = +-a (1 + e u') with a^2 sqrt(d_k) = 1e4, so that
    // scale * q.k = +-1e4 (sign by sequence) plus a spread of 1e4 e sqrt(2/3) / sqrt(d_k), O(1).
    const float offset_a = std::sqrt(1.0e4f / std::sqrt(static_cast<float>(s.dim_k)));
    constexpr float kOffsetJitter = 0.002f;
    fill_tensor(pr.q, pr.q_strides, s, s.len_q, s.dim_k, [&](int b, int, int i, int) {
        float x = uniform(rng, -qk_range, qk_range);
        if (s.fill == Fill::offset_logits) x = offset_a * (1.0f + kOffsetJitter * x);
        return padding(b, i, s.len_q) ? nan : x;
    });
    std::vector<float> shared_key(static_cast<std::size_t>(s.dim_k));
    fill_tensor(pr.k, pr.k_strides, s, s.len_k, s.dim_k, [&](int b, int, int j, int c) {
        float x = uniform(rng, -qk_range, qk_range);
        if (s.fill == Fill::offset_logits) x = (b % 2 ? -offset_a : offset_a) * (1.0f + kOffsetJitter * x);
        if (s.fill == Fill::equal_keys) {
            if (j == 0) shared_key[static_cast<std::size_t>(c)] = x;
            x = shared_key[static_cast<std::size_t>(c)];
        }
        return padding(b, j, s.len_k) ? nan : x;
    });
    fill_tensor(pr.v, pr.v_strides, s, s.len_k, s.dim_v, [&](int b, int, int j, int) {
        const float x = uniform(rng, -1.0f, 1.0f);
        return padding(b, j, s.len_k) ? nan : x;
    });
    return pr;
}

kn::KernelOptions options_for(const Variant& variant, int threads) {
    kn::KernelOptions o;
    o.kind = variant.kind;
    o.isa = variant.isa;
    o.precision = variant.precision;
    o.amx_permitted = variant.amx;
    o.threads = threads;
    return o;
}

namespace {

// 64-byte aligned scratch, poisoned so that reading scratch before writing it shows up as NaN,
// with a guarded tail after the bytes the kernel was promised.
class Workspace {
public:
    static constexpr std::size_t kTail = 64;
    explicit Workspace(std::size_t bytes)
        : bytes_(bytes), allocated_((bytes + kTail + 63) / 64 * 64),
          data_(static_cast<unsigned char*>(std::aligned_alloc(64, allocated_))) {
        if (data_ == nullptr) throw std::bad_alloc();
        std::memset(data_, kPoisonByte, bytes_);
        std::memset(data_ + bytes_, kGuardByte, allocated_ - bytes_);
    }
    ~Workspace() { std::free(data_); }
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;
    void* data() { return data_; }
    bool tail_intact() const {
        for (std::size_t i = bytes_; i < allocated_; ++i) {
            if (data_[i] != kGuardByte) return false;
        }
        return true;
    }

private:
    std::size_t bytes_, allocated_;
    unsigned char* data_;
};

}  // namespace

Outputs run_kernel(const Problem& problem, const kn::KernelOptions& options, const Request& request) {
    const Shape& s = problem.shape;
    const std::size_t bh_rows = static_cast<std::size_t>(s.batch) * s.heads * s.len_q;
    std::size_t weight_rows = 0;
    if (request.weights_mode == kn::WeightsMode::all) weight_rows = bh_rows;
    if (request.weights_mode == kn::WeightsMode::mean_over_heads) weight_rows = static_cast<std::size_t>(s.batch) * s.len_q;
    const std::size_t weight_count = weight_rows * s.len_k;
    const bool f16 = request.weights_type == kn::WeightsType::f16;

    GuardedBuffer<float> out(problem.out_span);
    GuardedBuffer<float> lse(request.lse ? bh_rows : 0);
    GuardedBuffer<float> w32(f16 ? 0 : weight_count);
    GuardedBuffer<std::uint16_t> w16(f16 ? weight_count : 0);

    kn::AttentionParams p = problem.params();
    p.out = out.data();
    p.lse = request.lse ? lse.data() : nullptr;
    p.weights_mode = request.weights_mode;
    p.weights_type = request.weights_type;
    if (request.weights_mode != kn::WeightsMode::none) {
        p.weights = f16 ? static_cast<void*>(w16.data()) : static_cast<void*>(w32.data());
    }
    const std::size_t bytes = kn::attention_workspace_bytes(p, options);
    Workspace workspace(bytes);
    kn::attention_forward(p, options, workspace.data(), bytes);

    EXPECT_TRUE(out.guards_intact()) << "write outside out";
    EXPECT_TRUE(lse.guards_intact()) << "write outside lse";
    EXPECT_TRUE(w32.guards_intact()) << "write outside f32 weights";
    EXPECT_TRUE(w16.guards_intact()) << "write outside f16 weights";
    EXPECT_TRUE(workspace.tail_intact()) << "write past the workspace size the kernel asked for";

    Outputs o;
    std::vector<char> covered(problem.out_span, 0);
    o.out.reserve(bh_rows * s.dim_v);
    const kn::TensorStrides& st = problem.out_strides;
    for (int b = 0; b < s.batch; ++b)
        for (int h = 0; h < s.heads; ++h)
            for (int i = 0; i < s.len_q; ++i) {
                const std::size_t base = static_cast<std::size_t>(b * st.seq + h * st.head + i * st.row);
                for (int c = 0; c < s.dim_v; ++c) {
                    o.out.push_back(out.data()[base + c]);
                    covered[base + c] = 1;
                }
            }
    std::size_t gaps_written = 0;
    for (std::size_t i = 0; i < covered.size(); ++i) {
        if (!covered[i] && !out.poisoned(i)) ++gaps_written;
    }
    EXPECT_EQ(gaps_written, 0u) << "elements between rows/heads/sequences of out were written";

    if (request.lse) o.lse.assign(lse.data(), lse.data() + bh_rows);
    if (f16) {
        o.weights_f16.assign(w16.data(), w16.data() + weight_count);
        o.weights.reserve(weight_count);
        for (std::uint16_t bits : o.weights_f16) o.weights.push_back(kn::half_to_float(bits));
    } else {
        o.weights.assign(w32.data(), w32.data() + weight_count);
    }
    return o;
}

Reference64 reference_f64(const Problem& problem, bool weights, bool weights_mean) {
    const Shape& s = problem.shape;
    const std::size_t rows = static_cast<std::size_t>(s.batch) * s.heads * s.len_q;
    Reference64 r;
    r.out.assign(rows * s.dim_v, 0.0);
    r.lse.assign(rows, 0.0);
    kn::ReferenceOutputs o;
    o.out = r.out.data();
    o.lse = r.lse.data();
    if (weights) {
        r.weights.assign(rows * s.len_k, 0.0);
        o.weights = r.weights.data();
    }
    const kn::AttentionParams p = problem.params();
    kn::reference_attention_f64(p, o);
    if (weights_mean) {
        r.weights_mean.assign(static_cast<std::size_t>(s.batch) * s.len_q * s.len_k, 0.0);
        kn::ReferenceOutputs m;
        m.weights = r.weights_mean.data();
        m.weights_mean_over_heads = true;
        kn::reference_attention_f64(p, m);
    }
    return r;
}

float round_to_bf16(float x) {
    std::uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    bits += 0x7fffu + ((bits >> 16) & 1u);  // ties to even
    bits &= 0xffff0000u;
    float rounded;
    std::memcpy(&rounded, &bits, sizeof rounded);
    return rounded;
}

namespace {

Naive32 naive(const Problem& problem, bool bf16) {
    const Shape& s = problem.shape;
    const kn::AttentionParams p = problem.params();
    const std::size_t lq = s.len_q, lk = s.len_k, dv = s.dim_v;
    const std::size_t rows = static_cast<std::size_t>(s.batch) * s.heads * lq;
    auto operand = [bf16](float x) { return bf16 ? round_to_bf16(x) : x; };
    Naive32 n;
    n.out.assign(rows * dv, 0.0f);
    n.lse.assign(rows, -std::numeric_limits<float>::infinity());
    n.weights.assign(rows * lk, 0.0f);
    n.weights_mean.assign(static_cast<std::size_t>(s.batch) * lq * lk, 0.0f);
    std::vector<float> logits(lk);
    for (int b = 0; b < s.batch; ++b) {
        const int queries = valid_tokens(s, b, s.len_q);
        const int keys_valid = valid_tokens(s, b, s.len_k);
        for (int h = 0; h < s.heads; ++h) {
            const float* qh = p.q + b * p.q_strides.seq + h * p.q_strides.head;
            const float* kh = p.k + b * p.k_strides.seq + h * p.k_strides.head;
            const float* vh = p.v + b * p.v_strides.seq + h * p.v_strides.head;
            for (int i = 0; i < queries; ++i) {
                const int keys = s.causal ? std::min(keys_valid, i + 1) : keys_valid;
                if (keys == 0) continue;
                const std::size_t row = (static_cast<std::size_t>(b) * s.heads + h) * lq + i;
                const float* qi = qh + i * p.q_strides.row;
                float m = -std::numeric_limits<float>::infinity();
                for (int j = 0; j < keys; ++j) {
                    const float* kj = kh + j * p.k_strides.row;
                    float dot = 0.0f;
                    for (int c = 0; c < s.dim_k; ++c) dot += operand(qi[c]) * operand(kj[c]);
                    logits[j] = dot * p.scale;
                    m = std::max(m, logits[j]);
                }
                float sum = 0.0f;
                float* o = n.out.data() + row * dv;
                for (int j = 0; j < keys; ++j) {
                    logits[j] = std::exp(logits[j] - m);
                    sum += logits[j];
                    if (bf16) continue;
                    const float* vj = vh + j * p.v_strides.row;
                    for (std::size_t c = 0; c < dv; ++c) o[c] += logits[j] * vj[c];
                }
                if (bf16) {  // P V with the normalised P in bf16, as a bf16 matrix product takes it
                    for (int j = 0; j < keys; ++j) {
                        const float pj = operand(logits[j] / sum);
                        const float* vj = vh + j * p.v_strides.row;
                        for (std::size_t c = 0; c < dv; ++c) o[c] += pj * operand(vj[c]);
                    }
                } else {
                    for (std::size_t c = 0; c < dv; ++c) o[c] /= sum;
                }
                n.lse[row] = m + std::log(sum);
                float* w = n.weights.data() + row * lk;
                float* mean = n.weights_mean.data() + (static_cast<std::size_t>(b) * lq + i) * lk;
                for (int j = 0; j < keys; ++j) {
                    w[j] = logits[j] / sum;
                    mean[j] += w[j];
                }
            }
        }
    }
    const float inv_heads = 1.0f / static_cast<float>(s.heads);
    for (float& x : n.weights_mean) x *= inv_heads;
    return n;
}

}  // namespace

Naive32 naive_f32(const Problem& problem) { return naive(problem, false); }
Naive32 naive_bf16(const Problem& problem) { return naive(problem, true); }

Naive32 naive_for(const Problem& problem, const Variant& variant) {
    const bool bf16 = variant.kind == kn::KernelKind::blocked && variant.precision == kn::Precision::bf16;
    return naive(problem, bf16);
}

ErrorStats error_stats(const std::vector<float>& values, const std::vector<double>& ref) {
    ErrorStats e;
    for (std::size_t i = 0; i < values.size() && i < ref.size(); ++i) {
        const double x = static_cast<double>(values[i]);
        const double r = ref[i];
        if (std::isnan(x)) {
            ++e.nans;
            continue;
        }
        if (!std::isfinite(r) || !std::isfinite(x)) {
            if (x != r) ++e.nonfinite_mismatch;
            continue;
        }
        const double err = std::fabs(x - r);
        if (err > e.max_abs) {
            e.max_abs = err;
            e.worst = i;
        }
        e.max_ref = std::max(e.max_ref, std::fabs(r));
        e.sum_sq_err += err * err;
        e.sum_sq_ref += r * r;
    }
    return e;
}

void expect_close_to_reference(const std::string& what, const std::vector<float>& got,
                               const std::vector<float>& naive, const std::vector<double>& ref) {
    ASSERT_EQ(got.size(), ref.size()) << what;
    ASSERT_EQ(naive.size(), ref.size()) << what;
    const ErrorStats g = error_stats(got, ref);
    const ErrorStats n = error_stats(naive, ref);
    // The floor covers cases where the naive code is exact by luck (one key, one-hot rows, equal
    // logits): a float result carries up to 2^-24 relative rounding, the kernel's summation
    // order and polynomial exp2 (relative error 2.6e-9) differ from the naive ones, so allow
    // about 16 ulps of the largest magnitude: 16 * 2^-24 ~= 1e-6.
    const double floor = 1e-6 * g.max_ref;
    const double bound = 2.0 * n.max_abs + floor;
    EXPECT_EQ(n.nans + n.nonfinite_mismatch, 0u) << what << ": the naive yardstick itself is broken";
    EXPECT_EQ(g.nans, 0u) << what << ": NaN in kernel output";
    EXPECT_EQ(g.nonfinite_mismatch, 0u) << what << ": infinities differ from the reference";
    EXPECT_LE(g.max_abs, bound) << what << ": max error " << g.max_abs << " at index " << g.worst << " (got "
                                << got[g.worst] << ", ref " << ref[g.worst] << "), naive max error "
                                << n.max_abs << ", floor " << floor;
    // NMSE <= 1e-7, or twice the naive NMSE where the naive implementation itself cannot reach
    // 1e-7: bf16 operands (2^-9 relative rounding), or fp32 logits of 1e4, which carry rounding
    // errors of ulp(1e4) ~ 1e-3 that every fp32 kernel inherits (offset_logits). Elsewhere the
    // naive fp32 NMSE is far below 5e-8 and the bound is 1e-7.
    if (g.sum_sq_ref > 0.0) {
        const double nmse_bound = std::max(1e-7, 2.0 * n.nmse());
        EXPECT_LE(g.nmse(), nmse_bound) << what << ": NMSE " << g.nmse() << " (naive " << n.nmse() << ")";
    }
}

std::size_t count_nans(const std::vector<float>& values) {
    std::size_t n = 0;
    for (float x : values) n += std::isnan(x) ? 1 : 0;
    return n;
}

// Empty vectors may have null data(), which memcmp must not see.
bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool bit_identical(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b) {
    return a.size() == b.size() &&
           (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(std::uint16_t)) == 0);
}

}  // namespace attnbatch::test
