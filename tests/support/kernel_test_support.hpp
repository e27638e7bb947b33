// Shared pieces of the kernel tests: a seeded problem generator with explicit layouts, guarded
// output buffers, a naive fp32 implementation (the yardstick for tolerances) and error stats.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attnbatch/kernels/attention.hpp"

namespace attnbatch::test {

namespace kn = attnbatch::kernels;

// ---- kernel variants ------------------------------------------------------------------------

struct Variant {
    kn::KernelKind kind;
    kn::Isa isa;
    std::string name;
    kn::Precision precision = kn::Precision::fp32;  // the backend's
    bool amx = false;  // bf16 on AMX tiles (the variant without it runs AVX512-BF16)
};

// The blocked kernel on every backend of this build (the backend table: avx512, avx512_bf16,
// avx2, portable on x86; a bf16 backend twice, on AVX512-BF16 and on AMX tiles), then the
// reference kernel with f32 outputs. Parameterised tests take all of them, so the test list is
// the same on every machine of a target, and skip the ones this CPU cannot run (AMX also needs
// the OS's permission, asked once through attnbatch::cli::amx_permitted, as the program does).
std::vector<Variant> all_variants();
std::vector<Variant> available_variants();
bool variant_available(const Variant& variant);
void PrintTo(const Variant& variant, std::ostream* os);
std::string variant_test_name(const ::testing::TestParamInfo<Variant>& info);

// ---- problems -------------------------------------------------------------------------------

// contiguous: (B, H, L, d). heads_packed: [B, L, H*d], the layout of the CLI's Q/K/V datasets.
// padded: rows, heads and sequences each followed by a gap, so stray reads and writes show.
enum class Layout { contiguous, heads_packed, padded };
const char* layout_name(Layout layout);

enum class Fill {
    uniform,       // q, k in [-2, 2), v in [-1, 1): logits of order 1
    large_logits,  // q, k scaled so that scale * q.k is of order +-1e4
    offset_logits, // scale * q.k = +1e4 (even sequences) or -1e4 (odd ones), spread O(1)
    equal_keys,    // every key of a (sequence, head) is the same row: all logits of a row equal
};

struct Shape {
    int batch = 1, heads = 1, len_q = 1, len_k = 1, dim_k = 1, dim_v = 1;
    bool causal = false;
    std::vector<std::int32_t> lengths;  // empty: every token valid
    Layout layout = Layout::contiguous;
    Fill fill = Fill::uniform;
    bool poison_padding = false;  // tokens at or past lengths[b] hold NaN instead of data
    std::string describe() const;
};

struct Problem {
    Shape shape;
    float scale = 0.0f;
    // Strided storage; the gaps of a padded layout hold NaN, so reading them shows in results.
    std::vector<float> q, k, v;
    kn::TensorStrides q_strides, k_strides, v_strides, out_strides;
    std::size_t out_span = 0;  // elements the out tensor covers, gaps included
    // Inputs bound; out, lse and weights are left null.
    kn::AttentionParams params() const;
};

Problem make_problem(const Shape& shape, std::uint32_t seed);

// ---- guarded buffers ------------------------------------------------------------------------

inline constexpr unsigned char kGuardByte = 0xA5;   // before and after the body
inline constexpr unsigned char kPoisonByte = 0xFF;  // the body before a call: NaN as f32 and f16

// A body of `count` elements between two guard blocks. The body starts poisoned, so an element
// the kernel should write but does not reads as NaN, and a gap it must skip stays poisoned.
template <typename T>
class GuardedBuffer {
public:
    static constexpr std::size_t kGuardElements = 256 / sizeof(T);

    explicit GuardedBuffer(std::size_t count)
        : count_(count), storage_(count + 2 * kGuardElements, pattern(kPoisonByte)) {
        std::fill_n(storage_.begin(), kGuardElements, pattern(kGuardByte));
        std::fill_n(storage_.end() - static_cast<std::ptrdiff_t>(kGuardElements), kGuardElements, pattern(kGuardByte));
    }
    T* data() { return storage_.data() + kGuardElements; }
    const T* data() const { return storage_.data() + kGuardElements; }
    std::size_t size() const { return count_; }

    bool guards_intact() const {
        const unsigned char* bytes = reinterpret_cast<const unsigned char*>(storage_.data());
        const std::size_t guard = sizeof(T) * kGuardElements;
        const std::size_t tail = sizeof(T) * (kGuardElements + count_);
        for (std::size_t i = 0; i < guard; ++i) {
            if (bytes[i] != kGuardByte || bytes[tail + i] != kGuardByte) return false;
        }
        return true;
    }
    bool poisoned(std::size_t index) const {
        const unsigned char* bytes = reinterpret_cast<const unsigned char*>(data() + index);
        for (std::size_t i = 0; i < sizeof(T); ++i) {
            if (bytes[i] != kPoisonByte) return false;
        }
        return true;
    }

private:
    static T pattern(unsigned char byte) {
        T value;
        std::memset(&value, byte, sizeof value);
        return value;
    }

    std::size_t count_;
    std::vector<T> storage_;
};

// ---- running a kernel -----------------------------------------------------------------------

struct Request {
    bool lse = true;
    kn::WeightsMode weights_mode = kn::WeightsMode::none;
    kn::WeightsType weights_type = kn::WeightsType::f32;
};

// What one call produced, gathered into contiguous (B, H, Lq, ...) order.
struct Outputs {
    std::vector<float> out;               // (B, H, Lq, d_v)
    std::vector<float> lse;               // (B, H, Lq), empty unless requested
    std::vector<float> weights;           // (B, H|1, Lq, Lk) as floats (f16 widened)
    std::vector<std::uint16_t> weights_f16;  // raw bits when f16 was asked
};

kn::KernelOptions options_for(const Variant& variant, int threads = 0);

// Runs attention_forward with guarded outputs and a poisoned workspace with a guarded tail,
// and records a test failure if any guard, workspace tail or out-gap was written.
Outputs run_kernel(const Problem& problem, const kn::KernelOptions& options, const Request& request);

// ---- references -----------------------------------------------------------------------------

struct Reference64 {
    std::vector<double> out, lse, weights, weights_mean;
};
// reference_attention_f64 of the library; weights and their head mean only when asked.
Reference64 reference_f64(const Problem& problem, bool weights, bool weights_mean);

struct Naive32 {
    std::vector<float> out, lse, weights, weights_mean;
};
// Plain loops in float: logits with a float dot product, two-pass softmax with std::exp.
Naive32 naive_f32(const Problem& problem);
// The same loops as a plain bf16 implementation does them: Q, K, V rounded to bf16 (nearest
// even), logits and P V accumulated in float, the softmax in float, the normalised P rounded
// to bf16 before P V; weights and lse in float. The yardstick of the bf16 backend.
Naive32 naive_bf16(const Problem& problem);
// naive_f32 or naive_bf16, by the variant's precision (the reference kernel: naive_f32).
Naive32 naive_for(const Problem& problem, const Variant& variant);

// x rounded to the nearest bfloat16, ties to even (finite x).
float round_to_bf16(float x);

// ---- errors ---------------------------------------------------------------------------------

struct ErrorStats {
    double max_abs = 0.0;      // over entries where the reference is finite
    double max_ref = 0.0;      // largest finite |ref|
    double sum_sq_err = 0.0, sum_sq_ref = 0.0;
    std::size_t nans = 0;                 // NaN in the tested values
    std::size_t nonfinite_mismatch = 0;   // ref infinite and value different, or the reverse
    std::size_t worst = 0;                // index of max_abs
    double nmse() const { return sum_sq_ref > 0.0 ? sum_sq_err / sum_sq_ref : 0.0; }
};

ErrorStats error_stats(const std::vector<float>& values, const std::vector<double>& ref);

// The flash-attention rule: max|got - ref| <= 2 max|naive - ref| + floor, NMSE <= 1e-7 (or
// 2x the naive NMSE where the naive implementation cannot do better: bf16, or fp32 on logits of
// 1e4), no NaN, infinities where the reference has them.
void expect_close_to_reference(const std::string& what, const std::vector<float>& got,
                               const std::vector<float>& naive, const std::vector<double>& ref);

std::size_t count_nans(const std::vector<float>& values);

// Bit patterns of float vectors for memcmp-style equality that treats -0 and NaN honestly.
bool bit_identical(const std::vector<float>& a, const std::vector<float>& b);
bool bit_identical(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b);

}  // namespace attnbatch::test
