// SIMD building blocks of the blocked kernel, over GCC vector extensions of the including
// backend's width (ATTNBATCH_VECTOR_BYTES): loads, stores and broadcasts, 2^x, horizontal
// reductions in a fixed order, in-register transposes and f16 stores. Compiled into each
// blocked backend's own namespace (see blocked_backend.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
// GCC 12's AVX-512 intrinsics start from _mm*_undefined_*() and then warn about it at every
// inlined call site (a known false positive); nothing here reads an undefined lane.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "attnbatch/kernels/half.hpp"

namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE {
namespace {

constexpr int kLanes = ATTNBATCH_VECTOR_BYTES / 4;
constexpr float kNegInf = -__builtin_huge_valf();

typedef float Vec __attribute__((vector_size(ATTNBATCH_VECTOR_BYTES), may_alias));
typedef std::int32_t IVec __attribute__((vector_size(ATTNBATCH_VECTOR_BYTES), may_alias));

// Unaligned vector access: as fast as aligned on current x86 when the data is aligned (the
// kernel's own buffers are), and safe for caller memory that is not (packed projections).
typedef float UnalignedVec __attribute__((vector_size(ATTNBATCH_VECTOR_BYTES), aligned(4), may_alias));
inline Vec load(const float* p) { return *reinterpret_cast<const UnalignedVec*>(p); }
inline void store(float* p, Vec v) { *reinterpret_cast<UnalignedVec*>(p) = v; }
// A store of a whole vector-aligned vector past the caches (x86's non-temporal stores), for rows
// written once that this thread does not read again: no read of each line before its write,
// and no dirty lines for the caches to evict later. Weakly ordered: stream_fence() before others
// read them. Where there is no such store, a plain one.
#if defined(__x86_64__) && ((ATTNBATCH_VECTOR_BYTES == 64 && defined(__AVX512F__)) || (ATTNBATCH_VECTOR_BYTES == 32 && defined(__AVX__)))
constexpr bool kStreamStores = true;
inline void stream(float* p, Vec v) {
#if ATTNBATCH_VECTOR_BYTES == 64
    _mm512_stream_ps(p, reinterpret_cast<__m512>(v));
#else
    _mm256_stream_ps(p, reinterpret_cast<__m256>(v));
#endif
}
inline void stream_fence() { _mm_sfence(); }
#else
constexpr bool kStreamStores = false;
inline void stream(float* p, Vec v) { store(p, v); }
inline void stream_fence() {}
#endif
// One broadcast instruction; the generic forms (0 + s, or a loop) compile to extra adds or
// inserts with GCC 12.
inline Vec splat(float s) {
#if ATTNBATCH_VECTOR_BYTES == 64 && defined(__AVX512F__)
    return reinterpret_cast<Vec>(_mm512_set1_ps(s));
#elif ATTNBATCH_VECTOR_BYTES == 32 && defined(__AVX__)
    return reinterpret_cast<Vec>(_mm256_set1_ps(s));
#elif ATTNBATCH_VECTOR_BYTES == 16 && defined(__SSE__)
    return reinterpret_cast<Vec>(_mm_set1_ps(s));
#else
    Vec v;
    for (int i = 0; i < kLanes; ++i) v[i] = s;
    return v;
#endif
}
// x in lanes [0, n), `other` in the rest: the visible part of a vector that straddles the end
// of a row's visible keys.
inline Vec first_lanes_or(Vec x, int n, Vec other) {
    Vec lane;
    for (int i = 0; i < kLanes; ++i) lane[i] = static_cast<float>(i);
    return lane < splat(static_cast<float>(n)) ? x : other;
}
inline int imin(int a, int b) { return a < b ? a : b; }
inline int imax(int a, int b) { return a > b ? a : b; }
inline float fmax_(float a, float b) { return a > b ? a : b; }
inline std::size_t round_up(std::size_t n, std::size_t m) { return (n + m - 1) / m * m; }

#if ATTNBATCH_VECTOR_BYTES == 64 && defined(__AVX512F__) && defined(__AVX512DQ__)
// Degree-6 polynomial for 2^f on [0, 1), absolute (and relative) error 2.8e-9 (fitted on
// Chebyshev nodes).
inline Vec exp2_unit(Vec f) {
    Vec p = splat(2.1865784786598053e-4f);
    p = p * f + splat(1.239133183441148e-3f);
    p = p * f + splat(9.6841863103423696e-3f);
    p = p * f + splat(5.5480630196705328e-2f);
    p = p * f + splat(2.4023045441230568e-1f);
    p = p * f + splat(6.9314693275886686e-1f);
    return p * f + splat(1.0000000025307452f);
}

// 2^x for finite x <= 0: 2^(x - floor x) by the polynomial, then scalef multiplies by
// 2^floor(x) (one VREDUCEPS and one VSCALEFPS); underflows through denormals to exactly 0,
// so that far-away keys weigh nothing.
inline Vec exp2_finite(Vec x) {
    // The zero-masked forms: the plain intrinsics start from _mm512_undefined_ps, which GCC 12
    // reports as maybe-uninitialized.
    constexpr __mmask16 kAllLanes = 0xffff;  // (see the diagnostic note at the top)
    const __m512 xv = reinterpret_cast<__m512>(x);
    const __m512 f = _mm512_maskz_reduce_ps(kAllLanes, xv, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    return reinterpret_cast<Vec>(_mm512_maskz_scalef_ps(kAllLanes, reinterpret_cast<__m512>(exp2_unit(reinterpret_cast<const Vec&>(f))), xv));
}
#else
// Degree-6 polynomial for 2^f on [-1/2, 1/2], relative error 2.6e-9 (fitted on Chebyshev nodes).
inline Vec exp2_fraction(Vec f) {
    Vec p = splat(1.5469731978806633e-4f);
    p = p * f + splat(1.3400432165373828e-3f);
    p = p * f + splat(9.618025602951885e-3f);
    p = p * f + splat(5.550327214209215e-2f);
    p = p * f + splat(2.4022651213595253e-1f);
    p = p * f + splat(6.931472067106192e-1f);
    return p * f + splat(9.999999999595489e-1f);
}

// 2^x for finite x <= 0; underflows to exactly 0 below 2^-126, so that far-away keys weigh
// nothing.
inline Vec exp2_finite(Vec x) {
    const Vec clamped = x < splat(-126.0f) ? splat(-126.0f) : x;
    const Vec magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
    const Vec shifted = clamped + magic;
    const Vec n = shifted - magic;
    const Vec p = exp2_fraction(clamped - n);
    const IVec exponent = (reinterpret_cast<const IVec&>(shifted) - 0x4B400000 + 127) << 23;
    const Vec scaled = p * reinterpret_cast<const Vec&>(exponent);
    return x < splat(-126.0f) ? Vec{} : scaled;
}
#endif

// 2^x for x <= 0 or -inf (a row's first rescale factor).
inline float exp2_scalar(float x) {
    if (x == kNegInf) return 0.0f;
    return exp2_finite(splat(x))[0];
}

// Pairwise tree reductions in a fixed order (so deterministic), log2(lanes) shuffles deep.
#if defined(__AVX__)
inline __m128 halve_to_128(Vec v, bool use_max) {
#if ATTNBATCH_VECTOR_BYTES == 64
    const __m512 w = reinterpret_cast<__m512>(v);
    const __m256 lo = _mm512_castps512_ps256(w);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(w), 1));
    const __m256 x = use_max ? _mm256_max_ps(lo, hi) : _mm256_add_ps(lo, hi);
#elif ATTNBATCH_VECTOR_BYTES == 32
    const __m256 x = reinterpret_cast<__m256>(v);
#endif
#if ATTNBATCH_VECTOR_BYTES >= 32
    const __m128 a = _mm256_castps256_ps128(x), b = _mm256_extractf128_ps(x, 1);
    return use_max ? _mm_max_ps(a, b) : _mm_add_ps(a, b);
#else
    (void)use_max;
    return reinterpret_cast<__m128>(v);
#endif
}

inline float reduce_128(__m128 x, bool use_max) {
    const __m128 swapped = _mm_movehl_ps(x, x);
    x = use_max ? _mm_max_ps(x, swapped) : _mm_add_ps(x, swapped);
    const __m128 odd = _mm_shuffle_ps(x, x, 1);
    x = use_max ? _mm_max_ss(x, odd) : _mm_add_ss(x, odd);
    return _mm_cvtss_f32(x);
}

inline float hsum(Vec v) { return reduce_128(halve_to_128(v, false), false); }
inline float hmax(Vec v) { return reduce_128(halve_to_128(v, true), true); }
#else
inline float hsum(Vec v) {
    float lanes[kLanes];
    std::memcpy(lanes, &v, sizeof lanes);
    for (int width = kLanes / 2; width > 0; width /= 2)
        for (int i = 0; i < width; ++i) lanes[i] += lanes[i + width];
    return lanes[0];
}

inline float hmax(Vec v) {
    float lanes[kLanes];
    std::memcpy(lanes, &v, sizeof lanes);
    for (int width = kLanes / 2; width > 0; width /= 2)
        for (int i = 0; i < width; ++i) lanes[i] = fmax_(lanes[i], lanes[i + width]);
    return lanes[0];
}
#endif

// GCC's two-source shuffle with a mask vector. Clang has no such builtin (its
// __builtin_shufflevector wants constant indices); the fuzz build compiles with clang and
// needs this to be right, not fast, so it moves lanes one by one.
inline Vec shuffle_two(const Vec& a, const Vec& b, const IVec& mask) {
#if defined(__clang__)
    Vec out;
    for (int j = 0; j < kLanes; ++j) out[j] = mask[j] < kLanes ? a[mask[j]] : b[mask[j] - kLanes];
    return out;
#else
    return __builtin_shuffle(a, b, mask);
#endif
}

// In-register transpose of kLanes x kLanes floats: log2(kLanes) stages, each swapping the
// off-diagonal h x h blocks of every 2h x 2h block with two-source shuffles.
template <int H>
inline void transpose_stage(Vec* rows) {
    IVec lo, hi;
    for (int j = 0; j < kLanes; ++j) {
        lo[j] = (j & H) == 0 ? j : kLanes + j - H;
        hi[j] = (j & H) == 0 ? j + H : kLanes + j;
    }
#pragma GCC unroll 16
    for (int i = 0; i < kLanes; ++i) {
        if ((i & H) != 0) continue;
        const Vec a = rows[i], b = rows[i + H];
        rows[i] = shuffle_two(a, b, lo);
        rows[i + H] = shuffle_two(a, b, hi);
    }
}

inline void transpose_square(Vec* rows) {
    if constexpr (kLanes >= 16) transpose_stage<8>(rows);
    if constexpr (kLanes >= 8) transpose_stage<4>(rows);
    if constexpr (kLanes >= 4) transpose_stage<2>(rows);
    if constexpr (kLanes >= 2) transpose_stage<1>(rows);
}

// dst[j] = f16(src[j] * factor), rounded to nearest even; eight at a time where F16C exists.
inline void store_half_row(const float* src, float factor, std::uint16_t* dst, int count) {
    int j = 0;
#if defined(__F16C__)
    const __m256 f = _mm256_set1_ps(factor);
    for (; j + 8 <= count; j += 8) {
        const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(src + j), f);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j),
                         _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
#endif
    for (; j < count; ++j) dst[j] = float_to_half(src[j] * factor);
}

}  // namespace
}  // namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE
