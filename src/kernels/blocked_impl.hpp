// The blocked attention kernel, written once over GCC vector extensions and compiled once per
// instruction set (blocked_portable.cpp, blocked_avx2.cpp, blocked_avx512.cpp). Each includer
// defines ATTNBATCH_ISA_NAMESPACE, ATTNBATCH_VECTOR_BYTES, ATTNBATCH_MR and ATTNBATCH_NV and
// compiles this file with its own -m flags. Everything here lives in that namespace and avoids
// inline functions from the standard library, so the linker never mixes code between ISAs.
//
// Per task (sequence, head, query tile), per key tile and per row block of MR queries,
// FlashAttention's online softmax (Dao et al., arXiv 2205.14135; Milakov & Gimelshein,
// arXiv 1805.02867), with c = scale * log2(e):
//   S = Q K^T                          register-blocked MR x NR micro-kernel over packed key
//                                      panels; it also takes the row max of whole panels
//   m' = max(m, c rowmax S); P = 2^(c S - m'); l' = l * 2^(m - m') + rowsum P
//   O' = O * 2^(m - m') + P V          the rescale is fused into the P.V micro-kernel
// and at the end O / l and lse = ln 2 * (m + log2 l). The row block's S strip stays in L1 from
// Q K^T to P V, and the data of the thread's next task is prefetched into L2 meanwhile. One thread owns a task from start to end
// and every reduction runs in a fixed order, so results do not depend on the thread count.
//
// Weights need the row's final max and sum, known only after the last key tile. Instead of a
// second QK^T pass, each tile's P is kept in a per-thread row strip (block_q x Lk floats, never
// L x L) with the running max it was taken against; the strip is rescaled by
// 2^(m_tile - m_final) / l when the rows are done.
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
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnbatch/kernels/attention.hpp"
#include "attnbatch/kernels/half.hpp"
#include "blocked_kernel.hpp"

namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE {
namespace {

constexpr int kLanes = ATTNBATCH_VECTOR_BYTES / 4;
constexpr int kMR = ATTNBATCH_MR;            // query rows per micro-tile
constexpr int kNV = ATTNBATCH_NV;            // vectors per micro-tile row
constexpr int kNR = kNV * kLanes;            // columns per micro-tile
#if !defined(ATTNBATCH_NV_PV)
#define ATTNBATCH_NV_PV ATTNBATCH_NV
#endif
constexpr int kNVpv = ATTNBATCH_NV_PV;       // vectors per row of the P.V micro-tile
constexpr int kNRpv = kNVpv * kLanes;        // value columns per P.V micro-tile
constexpr std::size_t kAlign = 64;
constexpr float kLog2e = 1.4426950408889634f;
constexpr double kLn2 = 0.6931471805599453;
constexpr float kNegInf = -__builtin_huge_valf();

typedef float Vec __attribute__((vector_size(ATTNBATCH_VECTOR_BYTES), may_alias));
typedef std::int32_t IVec __attribute__((vector_size(ATTNBATCH_VECTOR_BYTES), may_alias));

// Unaligned vector access: as fast as aligned on current x86 when the data is aligned (the
// kernel's own buffers are), and safe for caller memory that is not (packed projections).
typedef float UnalignedVec __attribute__((vector_size(ATTNBATCH_VECTOR_BYTES), aligned(4), may_alias));
inline Vec load(const float* p) { return *reinterpret_cast<const UnalignedVec*>(p); }
inline void store(float* p, Vec v) { *reinterpret_cast<UnalignedVec*>(p) = v; }
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

// c[MR x NR] = a[MR x dk] . b[dk x NR]   (a: query rows, lda apart; b: packed key panel)
// The MR broadcasts per step read MR rows side by side, which L1 serves as well as a
// transposed copy would, and the queries need no transpose. With kRowMax, also
// row_max[m] = max(row_max[m], c[m][:]) lane-wise while the tile is still in registers.
template <bool kRowMax = false>
inline void micro_qk(const float* __restrict a, std::ptrdiff_t lda, const float* __restrict b, int dk,
                     float* __restrict c, int ldc, Vec* __restrict row_max = nullptr) {
    Vec acc[kMR][kNV];
#pragma GCC unroll 16
    for (int m = 0; m < kMR; ++m)
#pragma GCC unroll 8
        for (int n = 0; n < kNV; ++n) acc[m][n] = Vec{};
    for (int kk = 0; kk < dk; ++kk) {
        Vec bv[kNV];
#pragma GCC unroll 8
        for (int n = 0; n < kNV; ++n) bv[n] = load(b + kk * kNR + n * kLanes);
#pragma GCC unroll 16
        for (int m = 0; m < kMR; ++m) {
            const Vec am = splat(a[m * lda + kk]);
#pragma GCC unroll 8
            for (int n = 0; n < kNV; ++n) acc[m][n] += am * bv[n];
        }
    }
#pragma GCC unroll 16
    for (int m = 0; m < kMR; ++m) {
#pragma GCC unroll 8
        for (int n = 0; n < kNV; ++n) store(c + m * ldc + n * kLanes, acc[m][n]);
        if constexpr (kRowMax) {
            Vec mx = row_max[m];
#pragma GCC unroll 8
            for (int n = 0; n < kNV; ++n) mx = acc[m][n] > mx ? acc[m][n] : mx;
            row_max[m] = mx;
        }
    }
}

// o[MR x NRpv] = o * alpha[m] + p[MR x count] . v[count x NRpv]
inline void micro_pv(float* __restrict o, int ldo, const float* __restrict alpha,
                     const float* __restrict p, int ldp, const float* __restrict v, int ldv,
                     int count) {
    Vec acc[kMR][kNVpv];
#pragma GCC unroll 16
    for (int m = 0; m < kMR; ++m) {
        const Vec am = splat(alpha[m]);
#pragma GCC unroll 8
        for (int n = 0; n < kNVpv; ++n) acc[m][n] = load(o + m * ldo + n * kLanes) * am;
    }
    for (int j = 0; j < count; ++j) {
        Vec bv[kNVpv];
#pragma GCC unroll 8
        for (int n = 0; n < kNVpv; ++n) bv[n] = load(v + j * ldv + n * kLanes);
#pragma GCC unroll 16
        for (int m = 0; m < kMR; ++m) {
            const Vec pm = splat(p[m * ldp + j]);
#pragma GCC unroll 8
            for (int n = 0; n < kNVpv; ++n) acc[m][n] += pm * bv[n];
        }
    }
#pragma GCC unroll 16
    for (int m = 0; m < kMR; ++m)
#pragma GCC unroll 8
        for (int n = 0; n < kNVpv; ++n) store(o + m * ldo + n * kLanes, acc[m][n]);
}

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

// Per-thread scratch, carved from the caller's workspace in this order, each 64-byte aligned.
struct Layout {
    int bq = 0, bk = 0;         // tile sizes (multiples of MR and NR)
    int dvp = 0;                // d_v padded to NRpv
    int lk_panels = 0;          // key panels of NR keys covering Lk
    int lkp = 0;                // Lk padded to a whole key tile
    int key_tiles = 0;
    std::size_t q_pack = 0, k_pack = 0, v_pack = 0, s_tile = 0, o_acc = 0, row_state = 0;
    std::size_t w_strip = 0, w_tile_max = 0, w_mean = 0;
    std::size_t per_thread = 0;
};

std::size_t floats(std::size_t n) { return round_up(n * sizeof(float), kAlign); }

Layout make_layout(const AttentionParams& p, int block_q, int block_k) {
    Layout l;
    const int lq_rounded = static_cast<int>(round_up(static_cast<std::size_t>(imax(p.len_q, 1)), kMR));
    const int lk_rounded = static_cast<int>(round_up(static_cast<std::size_t>(imax(p.len_k, 1)), kNR));
    l.bq = imin(static_cast<int>(round_up(static_cast<std::size_t>(imax(block_q, 1)), kMR)), lq_rounded);
    l.bk = imin(static_cast<int>(round_up(static_cast<std::size_t>(imax(block_k, 1)), kNR)), lk_rounded);
    l.dvp = static_cast<int>(round_up(static_cast<std::size_t>(p.dim_v), kNRpv));
    l.lk_panels = lk_rounded / kNR;
    l.key_tiles = (p.len_k + l.bk - 1) / l.bk;
    l.lkp = l.key_tiles * l.bk;
    const std::size_t bq = l.bq, dk = p.dim_k;
    l.q_pack = floats(static_cast<std::size_t>(kMR) * dk);  // a partial last row block, zero-padded
    l.k_pack = floats(static_cast<std::size_t>(l.lk_panels) * kNR * dk);
    l.v_pack = floats(static_cast<std::size_t>(lk_rounded) * l.dvp);
    l.s_tile = floats(static_cast<std::size_t>(kMR) * l.bk);  // one row block's strip
    l.o_acc = floats(bq * l.dvp);
    l.row_state = 4 * floats(bq);  // m, l, alpha, valid keys
    if (p.weights_mode != WeightsMode::none && p.weights != nullptr) {
        l.w_strip = floats(bq * l.lkp);
        l.w_tile_max = floats(bq * l.key_tiles);
        if (p.weights_mode == WeightsMode::mean_over_heads) l.w_mean = floats(bq * l.lkp);
    }
    l.per_thread = l.q_pack + l.k_pack + l.v_pack + l.s_tile + l.o_acc + l.row_state + l.w_strip +
                   l.w_tile_max + l.w_mean;
    return l;
}

// Software prefetch (into L2) of rows the thread's next task will read, a few rows before each
// micro-kernel call of the current task, so that the next task's packing and first blocks do
// not wait on memory. Only a hint: a wrong guess of the next task costs bandwidth, not results.
struct Prefetch {
    struct Stream {
        const char* base;
        std::ptrdiff_t stride;  // bytes between rows
        int rows;
        std::ptrdiff_t row_bytes;
    };
    static constexpr int kStreams = 3;
    Stream streams[kStreams];
    int streams_used = 0, stream = 0, row = 0, lines_per_step = 0;
    const char* line = nullptr;  // next line of the current row, and the row's end
    const char* end = nullptr;

    void clear() {
        streams_used = stream = row = lines_per_step = 0;
        line = end = nullptr;
    }
    void add(const float* base, std::ptrdiff_t stride, int rows, int cols) {
        if (rows <= 0 || streams_used == kStreams) return;
        Stream st{reinterpret_cast<const char*>(base), stride * static_cast<std::ptrdiff_t>(sizeof(float)), rows,
                  cols * static_cast<std::ptrdiff_t>(sizeof(float))};
        if (st.stride == st.row_bytes) {  // contiguous rows: one long row
            st.row_bytes *= rows;
            st.rows = 1;
        }
        streams[streams_used++] = st;
    }
    long total_lines() const {
        long n = 0;
        for (int i = 0; i < streams_used; ++i) n += streams[i].rows * (streams[i].row_bytes / 64 + 2);
        return n;
    }
    void step() {
        for (int n = 0; n < lines_per_step; ++n) {
            if (line >= end) {  // the next row, from the cache line that holds its start
                if (stream == streams_used) return;
                const Stream& st = streams[stream];
                const char* start = st.base + row * st.stride;
                line = reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(start) & ~std::uintptr_t{63});
                end = start + st.row_bytes;
                if (++row == st.rows) {
                    row = 0;
                    ++stream;
                }
            }
            __builtin_prefetch(line, 0, 2);
            line += 64;
        }
    }
};

// The task a thread will probably run next, as a hint for prefetching (-1: none).
struct NextTask {
    int b = -1, h = -1, i0 = -1;   // its query tile
    int kv_b = -1, kv_h = -1;      // a (sequence, head) whose keys and values to prefetch a share of
    int kv_row0 = 0, kv_row1 = 0;  // that share, as a fraction of its keys, in parts of len_q
};

struct Scratch {
    float* q_pack;
    float* k_pack;
    float* v_pack;
    float* s_tile;
    float* o_acc;
    float* m;
    float* l;
    float* alpha;
    int* valid_keys;
    float* w_strip;
    float* w_tile_max;
    float* w_mean;
    long packed_seq = -1, packed_head = -1;  // which (sequence, head) k_pack/v_pack hold
    Prefetch prefetch;
};

Scratch carve(const Layout& layout, char* base) {
    Scratch s{};
    auto take = [&base](std::size_t bytes) {
        char* here = base;
        base += bytes;
        return here;
    };
    s.q_pack = reinterpret_cast<float*>(take(layout.q_pack));
    s.k_pack = reinterpret_cast<float*>(take(layout.k_pack));
    s.v_pack = reinterpret_cast<float*>(take(layout.v_pack));
    s.s_tile = reinterpret_cast<float*>(take(layout.s_tile));
    s.o_acc = reinterpret_cast<float*>(take(layout.o_acc));
    const std::size_t state = layout.row_state / 4;
    s.m = reinterpret_cast<float*>(take(state));
    s.l = reinterpret_cast<float*>(take(state));
    s.alpha = reinterpret_cast<float*>(take(state));
    s.valid_keys = reinterpret_cast<int*>(take(state));
    s.w_strip = layout.w_strip ? reinterpret_cast<float*>(take(layout.w_strip)) : nullptr;
    s.w_tile_max = layout.w_tile_max ? reinterpret_cast<float*>(take(layout.w_tile_max)) : nullptr;
    s.w_mean = layout.w_mean ? reinterpret_cast<float*>(take(layout.w_mean)) : nullptr;
    return s;
}

struct Task {
    const AttentionParams& p;
    const Layout& layout;
    Scratch& s;
};

int valid_queries(const AttentionParams& p, int b) { return p.lengths ? imin(p.lengths[b], p.len_q) : p.len_q; }
int valid_keys(const AttentionParams& p, int b) { return p.lengths ? imin(p.lengths[b], p.len_k) : p.len_k; }

// In-register transpose of kLanes x kLanes floats: log2(kLanes) stages, each swapping the
// off-diagonal h x h blocks of every 2h x 2h block with two-source shuffles.
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

// Keys transposed into panels of NR (panel, dk, NR) and values into rows padded to dvp, both
// zero beyond the valid keys so that whole panels can be computed. (Reading the values where
// they are, when d_v needs no padding, measured 3-4% slower.)
void pack_keys_values(const Task& t, int b, int h, int keys) {
    const AttentionParams& p = t.p;
    Scratch& s = t.s;
    if (s.packed_seq == b && s.packed_head == h) return;
    const float* kbase = p.k + b * p.k_strides.seq + h * p.k_strides.head;
    const float* vbase = p.v + b * p.v_strides.seq + h * p.v_strides.head;
    const int dk = p.dim_k, dv = p.dim_v, dvp = t.layout.dvp;
    const int panels = (keys + kNR - 1) / kNR;
    const int full_panels = dk % kLanes == 0 ? keys / kNR : 0;
    for (int panel = 0; panel < full_panels; ++panel) {  // kLanes x kLanes squares in registers
        float* dst = s.k_pack + static_cast<std::size_t>(panel) * dk * kNR;
        for (int g = 0; g < kNV; ++g) {
            const float* src = kbase + static_cast<std::ptrdiff_t>(panel * kNR + g * kLanes) * p.k_strides.row;
            for (int c0 = 0; c0 < dk; c0 += kLanes) {
                Vec rows[kLanes];
#pragma GCC unroll 16
                for (int i = 0; i < kLanes; ++i) rows[i] = load(src + i * p.k_strides.row + c0);
                transpose_square(rows);
#pragma GCC unroll 16
                for (int i = 0; i < kLanes; ++i) store(dst + (c0 + i) * kNR + g * kLanes, rows[i]);
            }
        }
    }
    for (int panel = full_panels; panel < panels; ++panel) {
        float* dst = s.k_pack + static_cast<std::size_t>(panel) * dk * kNR;
        for (int lane = 0; lane < kNR; ++lane) {
            const int j = panel * kNR + lane;
            if (j < keys) {
                const float* row = kbase + j * p.k_strides.row;
                for (int c = 0; c < dk; ++c) dst[c * kNR + lane] = row[c];
            } else {
                for (int c = 0; c < dk; ++c) dst[c * kNR + lane] = 0.0f;
            }
        }
    }
    for (int j = 0; j < keys; ++j) {
        const float* row = vbase + j * p.v_strides.row;
        float* dst = s.v_pack + static_cast<std::size_t>(j) * dvp;
        std::memcpy(dst, row, sizeof(float) * dv);
        for (int c = dv; c < dvp; ++c) dst[c] = 0.0f;
    }
    s.packed_seq = b;
    s.packed_head = h;
}

// Queries of rows [i0, i0 + count) as a row-major (MR, dk) block, rows past `count` zero: the
// last row block of a head when it would run past the end of the query tensor.
void pack_query_block(const Task& t, int b, int h, int i0, int count) {
    const AttentionParams& p = t.p;
    const float* qbase = p.q + b * p.q_strides.seq + h * p.q_strides.head;
    const int dk = p.dim_k;
    for (int r = 0; r < kMR; ++r) {
        float* dst = t.s.q_pack + static_cast<std::size_t>(r) * dk;
        if (r < count) {
            std::memcpy(dst, qbase + (i0 + r) * p.q_strides.row, sizeof(float) * dk);
        } else {
            std::memset(dst, 0, sizeof(float) * dk);
        }
    }
}

// Online softmax of one row of the S tile: turns S into P in place over `width` columns
// (zero past `count` valid ones) and updates the row's max, sum and rescale factor. S is the
// unscaled Q K^T; `factor` = scale * log2(e) > 0 is applied in the exponent's FMA, and m is
// kept in those scaled units (factor > 0 commutes with the max).
// `partial_max` holds the lane-wise max of the first `scanned` columns (a multiple of the
// vector width, computed by micro_qk).
void softmax_row(float* row, int count, int width, float factor, Vec partial_max, int scanned, float& m,
                 float& l, float& alpha) {
    Vec vmax = partial_max;
    int j = scanned;
    for (; j + kLanes <= count; j += kLanes) {
        const Vec x = load(row + j);
        vmax = x > vmax ? x : vmax;
    }
    float tile_max = hmax(vmax);
    for (; j < count; ++j) tile_max = fmax_(tile_max, row[j]);
    const float m_new = fmax_(m, tile_max * factor);
    alpha = exp2_scalar(m - m_new);  // 0 on the first tile, where m = -inf
    const Vec scale = splat(factor);
    const Vec shift = splat(m_new);
    Vec vsum = Vec{};
    const int full = count / kLanes * kLanes;
#pragma GCC unroll 4
    for (j = 0; j < full; j += kLanes) {  // whole vectors of visible keys need no mask
        const Vec e = exp2_finite(load(row + j) * scale - shift);
        store(row + j, e);
        vsum += e;
    }
    if (full < width) {  // the vector straddling `count`, then zeros up to the panel edge
        Vec lane_index;
        for (int i = 0; i < kLanes; ++i) lane_index[i] = static_cast<float>(full + i);
        const Vec e = exp2_finite(load(row + full) * scale - shift);
        const Vec kept = lane_index < splat(static_cast<float>(count)) ? e : Vec{};
        store(row + full, kept);
        vsum += kept;
        for (j = full + kLanes; j < width; j += kLanes) store(row + j, Vec{});
    }
    l = l * alpha + hsum(vsum);
    m = m_new;
}

void write_masked_row_weights(const Task& t, int b, int h, int i) {
    const AttentionParams& p = t.p;
    const std::size_t lk = p.len_k;
    if (p.weights_mode == WeightsMode::mean_over_heads) return;  // the mean strip starts at zero
    const std::size_t offset = ((static_cast<std::size_t>(b) * p.heads + h) * p.len_q + i) * lk;
    if (p.weights_type == WeightsType::f32) {
        std::memset(static_cast<float*>(p.weights) + offset, 0, lk * sizeof(float));
    } else {
        std::memset(static_cast<std::uint16_t*>(p.weights) + offset, 0, lk * sizeof(std::uint16_t));
    }
}

// Normalises row r's weight strip (tile t was exponentiated against w_tile_max[r][t]) into
// the destination, or adds it to the head-mean strip.
void finish_row_weights(const Task& t, int b, int h, int i, int r, int keys_valid, float m_final,
                        float l_final) {
    const AttentionParams& p = t.p;
    const Layout& layout = t.layout;
    const float* strip = t.s.w_strip + static_cast<std::size_t>(r) * layout.lkp;
    const float inv_l = 1.0f / l_final;
    const int lk = p.len_k;
    const bool mean = p.weights_mode == WeightsMode::mean_over_heads;
    const std::size_t offset = ((static_cast<std::size_t>(b) * p.heads + h) * p.len_q + i) * lk;
    float* const f32_row = mean ? t.s.w_mean + static_cast<std::size_t>(r) * layout.lkp
                                : (p.weights_type == WeightsType::f32 ? static_cast<float*>(p.weights) + offset : nullptr);
    std::uint16_t* const f16_row = f32_row ? nullptr : static_cast<std::uint16_t*>(p.weights) + offset;
    for (int tile = 0, k0 = 0; k0 < keys_valid; ++tile, k0 += layout.bk) {
        const float factor = exp2_scalar(t.s.w_tile_max[r * layout.key_tiles + tile] - m_final) * inv_l;
        const int k1 = imin(k0 + layout.bk, keys_valid);
        if (f16_row) {
            store_half_row(strip + k0, factor, f16_row + k0, k1 - k0);
        } else if (mean) {
            for (int j = k0; j < k1; ++j) f32_row[j] += strip[j] * factor;
        } else {
            for (int j = k0; j < k1; ++j) f32_row[j] = strip[j] * factor;
        }
    }
    if (mean) return;  // the mean strip starts at zero
    if (f16_row) {
        std::memset(f16_row + keys_valid, 0, sizeof(std::uint16_t) * (lk - keys_valid));
    } else {
        std::memset(f32_row + keys_valid, 0, sizeof(float) * (lk - keys_valid));
    }
}

// One (sequence, head, query tile): rows [i0, i0 + bq) of head h of sequence b.
void attend_tile(const Task& t, int b, int h, int i0, const NextTask& next) {
    const AttentionParams& p = t.p;
    const Layout& layout = t.layout;
    Scratch& s = t.s;
    const int bq = imin(layout.bq, p.len_q - i0);
    const int queries = valid_queries(p, b);
    const int keys = valid_keys(p, b);
    const int rows = imax(0, imin(bq, queries - i0));
    const bool want_weights = s.w_strip != nullptr;
    float* lse = p.lse ? p.lse + (static_cast<std::size_t>(b) * p.heads + h) * p.len_q : nullptr;
    float* out = p.out + b * p.out_strides.seq + h * p.out_strides.head;

    int* row_keys = s.valid_keys;
    for (int r = 0; r < layout.bq; ++r) {
        const int i = i0 + r;
        row_keys[r] = r < rows ? (p.causal ? imin(keys, i + 1) : keys) : 0;
        s.m[r] = kNegInf;
        s.l[r] = 0.0f;
    }
    const int tile_keys = rows > 0 ? row_keys[rows - 1] : 0;  // rows' key counts never decrease
    if (tile_keys > 0) {
        pack_keys_values(t, b, h, keys);
        std::memset(s.o_acc, 0, sizeof(float) * static_cast<std::size_t>(layout.bq) * layout.dvp);
    }
    const int blocks = (rows + kMR - 1) / kMR;
    // Q K^T reads the query rows where they are, except a last row block that would run past the
    // end of the query tensor (rows past `rows` but inside it are computed and ignored).
    const float* qbase = p.q + b * p.q_strides.seq + h * p.q_strides.head;
    const int direct_blocks = imin(blocks, (p.len_q - i0) / kMR);
    if (tile_keys > 0 && direct_blocks < blocks) {
        pack_query_block(t, b, h, i0 + direct_blocks * kMR, p.len_q - i0 - direct_blocks * kMR);
    }
    const float factor = p.scale * kLog2e;
    {  // prefetch for the next task, spread over this task's micro-kernel calls
        Prefetch& pf = s.prefetch;
        pf.clear();
        if (next.b >= 0) {
            const float* q = p.q + next.b * p.q_strides.seq + next.h * p.q_strides.head + next.i0 * p.q_strides.row;
            pf.add(q, p.q_strides.row, imin(layout.bq, p.len_q - next.i0), p.dim_k);
        }
        if (next.kv_b >= 0 && !(next.kv_b == b && next.kv_h == h)) {
            const long next_keys = valid_keys(p, next.kv_b);
            const int k_lo = static_cast<int>(next_keys * next.kv_row0 / p.len_q);
            const int k_hi = static_cast<int>(next_keys * next.kv_row1 / p.len_q);
            pf.add(p.k + next.kv_b * p.k_strides.seq + next.kv_h * p.k_strides.head + k_lo * p.k_strides.row,
                   p.k_strides.row, k_hi - k_lo, p.dim_k);
            pf.add(p.v + next.kv_b * p.v_strides.seq + next.kv_h * p.v_strides.head + k_lo * p.v_strides.row,
                   p.v_strides.row, k_hi - k_lo, p.dim_v);
        }
        // Micro-kernel calls of this task (about half of them with a causal mask), so that the
        // prefetches finish about three quarters into the task.
        long calls = static_cast<long>(blocks) * ((tile_keys + kNR - 1) / kNR + kMR + layout.dvp / kNRpv);
        if (p.causal) calls /= 2;
        calls = calls * 3 / 4 > 0 ? calls * 3 / 4 : 1;
        pf.lines_per_step = static_cast<int>((pf.total_lines() + calls - 1) / calls);
    }
    for (int k0 = 0, tile = 0; k0 < tile_keys; k0 += layout.bk, ++tile) {
        const int kw = imin(layout.bk, tile_keys - k0);
        // Row block by row block, so that the block's S strip (MR x bk) stays in L1 from Q K^T
        // through the softmax to P V; the key tile is read from L2 once per block.
        for (int blk = 0; blk < blocks; ++blk) {
            const int r0 = blk * kMR;
            const int last = imin(r0 + kMR, rows) - 1;
            const int block_count = imin(imax(row_keys[last] - k0, 0), kw);
            if (block_count == 0) continue;
            const int width = static_cast<int>(round_up(block_count, kNR));
            // S = Q K^T over the panels some row of the block can see. Panels every row of the
            // block sees whole also take the row max on the fly; softmax_row scans the rest.
            const int full_panels = imin(imax(row_keys[r0] - k0, 0), kw) / kNR;
            Vec row_max[kMR];
            for (int m = 0; m < kMR; ++m) row_max[m] = splat(kNegInf);
            const bool direct = blk < direct_blocks;
            const float* qb = direct ? qbase + (i0 + r0) * p.q_strides.row : s.q_pack;
            const std::ptrdiff_t ldq = direct ? p.q_strides.row : p.dim_k;
            for (int panel = 0; panel * kNR < block_count; ++panel) {
                const float* kp = s.k_pack + static_cast<std::size_t>(k0 / kNR + panel) * p.dim_k * kNR;
                s.prefetch.step();
                if (panel < full_panels) {
                    micro_qk<true>(qb, ldq, kp, p.dim_k, s.s_tile + panel * kNR, layout.bk, row_max);
                } else {
                    micro_qk(qb, ldq, kp, p.dim_k, s.s_tile + panel * kNR, layout.bk);
                }
            }
            for (int r = r0; r < r0 + kMR; ++r) {
                float* srow = s.s_tile + static_cast<std::size_t>(r - r0) * layout.bk;
                const int count = r < rows ? imin(imax(row_keys[r] - k0, 0), kw) : 0;
                if (count == 0) {  // nothing visible in this tile: P row is zero, O unchanged
                    std::memset(srow, 0, sizeof(float) * width);
                    s.alpha[r] = 1.0f;
                    if (want_weights && r < rows) s.w_tile_max[r * layout.key_tiles + tile] = s.m[r];
                    continue;
                }
                s.prefetch.step();
                softmax_row(srow, count, width, factor, row_max[r - r0], full_panels * kNR, s.m[r], s.l[r], s.alpha[r]);
                if (want_weights) {
                    s.w_tile_max[r * layout.key_tiles + tile] = s.m[r];
                    std::memcpy(s.w_strip + static_cast<std::size_t>(r) * layout.lkp + k0, srow,
                                sizeof(float) * count);
                }
            }
            for (int c0 = 0; c0 < layout.dvp; c0 += kNRpv) {
                s.prefetch.step();
                micro_pv(s.o_acc + static_cast<std::size_t>(r0) * layout.dvp + c0, layout.dvp,
                         s.alpha + r0, s.s_tile, layout.bk,
                         s.v_pack + static_cast<std::size_t>(k0) * layout.dvp + c0, layout.dvp, block_count);
            }
        }
    }
    for (int r = 0; r < bq; ++r) {
        const int i = i0 + r;
        float* orow = out + i * p.out_strides.row;
        if (r >= rows || s.l[r] == 0.0f) {
            for (int c = 0; c < p.dim_v; ++c) orow[c] = 0.0f;
            if (lse) lse[i] = kNegInf;
            if (want_weights) {
                if (p.weights_mode == WeightsMode::mean_over_heads) continue;
                write_masked_row_weights(t, b, h, i);
            }
            continue;
        }
        const float inv_l = 1.0f / s.l[r];
        const float* acc = s.o_acc + static_cast<std::size_t>(r) * layout.dvp;
        for (int c = 0; c < p.dim_v; ++c) orow[c] = acc[c] * inv_l;
        if (lse) lse[i] = static_cast<float>((static_cast<double>(s.m[r]) + __builtin_log2(static_cast<double>(s.l[r]))) * kLn2);
        if (want_weights) finish_row_weights(t, b, h, i, r, row_keys[r], s.m[r], s.l[r]);
    }
}

// Mean over heads: one task owns (sequence, query tile) and visits the heads in order.
void attend_tile_mean(const Task& t, int b, int i0, const NextTask& next) {
    const AttentionParams& p = t.p;
    const Layout& layout = t.layout;
    const int bq = imin(layout.bq, p.len_q - i0);
    std::memset(t.s.w_mean, 0, sizeof(float) * static_cast<std::size_t>(bq) * layout.lkp);
    for (int h = 0; h < p.heads; ++h) {
        NextTask head_next = next;
        if (h + 1 < p.heads) head_next = NextTask{b, h + 1, i0, b, h + 1, 0, p.len_q};
        attend_tile(t, b, h, i0, head_next);
    }
    const float inv_heads = 1.0f / static_cast<float>(p.heads);
    const std::size_t lk = p.len_k;
    for (int r = 0; r < bq; ++r) {
        const std::size_t offset = (static_cast<std::size_t>(b) * p.len_q + i0 + r) * lk;
        float* mean = t.s.w_mean + static_cast<std::size_t>(r) * layout.lkp;
        if (p.weights_type == WeightsType::f32) {
            float* dst = static_cast<float*>(p.weights) + offset;
            for (std::size_t j = 0; j < lk; ++j) dst[j] = mean[j] * inv_heads;
        } else {
            store_half_row(mean, inv_heads, static_cast<std::uint16_t*>(p.weights) + offset, static_cast<int>(lk));
        }
    }
}

// Dynamic scheduling hands out chunks of `chunk` tasks in order, so a thread's next task is most
// likely the next one in its chunk, else the start of the chunk `threads` further on. The keys
// and values of that later chunk's head are prefetched in shares across the current chunk's
// tasks, when one head's keys and values take at most a quarter of a 2 MiB L2.
NextTask guess_next_task(const AttentionParams& p, const Layout& layout, long id, long q_tiles, long tasks,
                         int chunk, int threads, bool mean) {
    NextTask n;
    auto head_of = [&](long task, int& b, int& h) {
        const long group = task / q_tiles;
        b = static_cast<int>(mean ? group : group / p.heads);
        h = static_cast<int>(mean ? 0 : group % p.heads);
    };
    const long far = (id / chunk + threads) * chunk;
    const long succ = (id + 1) % chunk != 0 ? id + 1 : far;
    if (succ < tasks) {
        head_of(succ, n.b, n.h);
        n.i0 = static_cast<int>(succ % q_tiles) * layout.bq;
    }
    const std::size_t kv_bytes = static_cast<std::size_t>(p.len_k) * (p.dim_k + p.dim_v) * sizeof(float);
    if (far < tasks && kv_bytes <= (std::size_t{512} << 10)) {
        head_of(far, n.kv_b, n.kv_h);
        const int i0 = static_cast<int>(id % q_tiles) * layout.bq;
        n.kv_row0 = i0;
        n.kv_row1 = imin(i0 + layout.bq, p.len_q);
    }
    return n;
}

}  // namespace

BlockedGeometry geometry() { return BlockedGeometry{kMR, kNR, kLanes}; }

std::size_t workspace_bytes(const AttentionParams& p, int block_q, int block_k, int threads) {
    return make_layout(p, block_q, block_k).per_thread * static_cast<std::size_t>(threads) + kAlign;
}

void forward(const AttentionParams& p, int block_q, int block_k, int threads, void* workspace) {
    const Layout layout = make_layout(p, block_q, block_k);
    char* base = reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(workspace), kAlign));
    const bool mean = p.weights_mode == WeightsMode::mean_over_heads && p.weights != nullptr;
    const long q_tiles = (p.len_q + layout.bq - 1) / layout.bq;
    const long groups = static_cast<long>(p.batch) * (mean ? 1 : p.heads);
    const long tasks = groups * q_tiles;
    // With enough (sequence, head) groups a thread takes whole groups, so K and V are packed
    // once per group rather than once per thread that touches it; otherwise single tiles, so
    // that a few long sequences still spread over every thread.
    const int chunk = groups >= 4L * threads ? static_cast<int>(q_tiles) : 1;
#if defined(_OPENMP)
#pragma omp parallel num_threads(threads)
#endif
    {
#if defined(_OPENMP)
        const int me = omp_get_thread_num();
#else
        const int me = 0;
        (void)threads;
        (void)chunk;
#endif
        Scratch scratch = carve(layout, base + layout.per_thread * static_cast<std::size_t>(me));
        const Task task{p, layout, scratch};
        // Dynamic scheduling only decides who computes a task, never how: results are the same
        // for any thread count.
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, chunk)
#endif
        for (long id = 0; id < tasks; ++id) {
            const int i0 = static_cast<int>(id % q_tiles) * layout.bq;
            const long seq_head = id / q_tiles;
            const NextTask next = guess_next_task(p, layout, id, q_tiles, tasks, chunk, threads, mean);
            if (mean) {
                attend_tile_mean(task, static_cast<int>(seq_head), i0, next);
            } else {
                attend_tile(task, static_cast<int>(seq_head / p.heads), static_cast<int>(seq_head % p.heads), i0, next);
            }
        }
    }
}

}  // namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE
