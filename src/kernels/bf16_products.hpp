// The two matrix products of the blocked kernel on bf16 operands with fp32 accumulation, for the
// bf16 backend (blocked_avx512_bf16.cpp): Q, K and V rounded to bfloat16 once, when packed; P
// rounded to bfloat16 after the softmax, which stays in fp32, as do the running shift and sums
// and O. It defines the names fp32_products.hpp lists; on the dot-product path it also makes S
// and P in one pass (fused_probabilities), on tiles the softmax is blocked_attention.hpp's.
//
// Operands are laid out for AMX tiles (Intel SDM vol. 1 ch. 18; TDPBF16PS): an A tile is 16
// rows of 32 bf16 (64 bytes), a B tile 16 rows of 16 column pairs (VNNI: the two bf16 of one
// column and depth 2k, 2k+1 side by side), a C tile 16 x 16 fp32.
//   q_pack  the query tile, row-major (bq, dkp), dkp = d_k rounded up to 32, zero-padded
//   k_pack  per panel of 32 keys, two halves of 16 keys, each (dkp/2 pairs, 16 keys, 2)
//   v_pack  (key pairs, dvp, 2): for keys 2j, 2j+1 the two values of each column side by side
//   p_pack  one row block's P, row-major (16, block_k)
// AVX512-BF16's VDPBF16PS reads the same layouts: a B row is one zmm, an A pair one broadcast.
// So the two paths share the packing and differ in the products and in how P is made.
// Tiles need the OS's permission (KernelOptions::amx_permitted); without it, or without AMX,
// the dot-product path runs. Each C element accumulates its products in depth order on both
// paths, but the hardware's rounding inside one instruction's pair of products is its own, and
// the paths shift the exponentials differently, so their bits differ: results are bit-identical
// for any thread count and row split on one path, and the resume identity records which path
// ran (matrix_unit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <immintrin.h>

#include "micro_kernels.hpp"
#if defined(ATTNBATCH_AMX_EMULATION)
#include "amx_emulation.hpp"
#endif

#if !defined(__AVX512BF16__) || !defined(__AMX_TILE__) || !defined(__AMX_BF16__)
#error "bf16_products.hpp is compiled with -mavx512bf16 -mamx-tile -mamx-bf16 (src/kernels/CMakeLists.txt)"
#endif

namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE {
namespace {

using Operand = std::uint16_t;  // bfloat16 bits
constexpr int kDepthAlign = 32;  // an A tile's row: 32 bf16
constexpr bool kPacksQueryTile = true;
constexpr bool kPacksProbabilities = true;
constexpr bool kMasksScores = false;  // the tile path's S strip is plain: softmax_row masks

static_assert(kLanes == 16 && kMR == 16 && kNR == 32 && kNRpv == 16,
              "bf16 products: 16-row tiles, key panels of two 16-key C tiles, 16 value columns per C tile");

}  // namespace
}  // namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE

#include "blocked_workspace.hpp"

namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE {
namespace {

// The tile instructions, through these so that tests can run the tile path on the plain C++
// model of amx_emulation.hpp (ATTNBATCH_AMX_EMULATION) where the CPU has no AMX. Macros: GCC's
// intrinsics paste the tile number into the instruction text, so it must be a literal. GCC 12's
// TILELOADD asm does not say that it reads memory: the barrier before it keeps the packing's
// stores ahead of it.
#if defined(ATTNBATCH_AMX_EMULATION)
#define ATTNBATCH_TILE_CONFIG(config) amx_emulation::load_config(config)
#define ATTNBATCH_TILE_RELEASE() ((void)0)
#define ATTNBATCH_TILE_ZERO(t) amx_emulation::zero(t)
#define ATTNBATCH_TILE_LOAD(t, base, stride) amx_emulation::load(t, base, stride)
#define ATTNBATCH_TILE_STORE(t, base, stride) amx_emulation::store(t, base, stride)
#define ATTNBATCH_TILE_DOT(c, a, b) amx_emulation::dot_bf16(c, a, b)
bool matrix_tiles_usable(bool amx_permitted) { return amx_permitted; }
#else
#define ATTNBATCH_TILE_CONFIG(config) _tile_loadconfig(config)
#define ATTNBATCH_TILE_RELEASE() _tile_release()
#define ATTNBATCH_TILE_ZERO(t) _tile_zero(t)
#define ATTNBATCH_TILE_LOAD(t, base, stride)    \
    do {                                         \
        __asm__ volatile("" ::: "memory");       \
        _tile_loadd(t, base, stride);            \
    } while (0)
#define ATTNBATCH_TILE_STORE(t, base, stride) _tile_stored(t, base, stride)
#define ATTNBATCH_TILE_DOT(c, a, b) _tile_dpbf16ps(c, a, b)
// Feature tests only; the OS permission is the caller's (amx_permitted).
bool matrix_tiles_usable(bool amx_permitted) {
    return amx_permitted && __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16");
}
#endif

// Palette 1, every tile 16 rows of 64 bytes: C tiles 0-3, A tile 4, B tiles 5-6.
struct alignas(64) TileConfig {
    std::uint8_t palette = 1;
    std::uint8_t start_row = 0;
    std::uint8_t reserved[14] = {};
    std::uint16_t bytes_per_row[16] = {};
    std::uint8_t rows[16] = {};
};

// Tile configuration is per thread: each thread of the parallel region loads its own.
void begin_products(Scratch& s) {
    if (!s.matrix_tiles) return;
    TileConfig config;
    for (int t = 0; t < 7; ++t) {
        config.bytes_per_row[t] = 64;
        config.rows[t] = 16;
    }
    ATTNBATCH_TILE_CONFIG(&config);
}

void end_products(Scratch& s) {
    if (s.matrix_tiles) ATTNBATCH_TILE_RELEASE();
}

// ---- rounding to bf16 -----------------------------------------------------------------------

// Round to nearest even (VCVTNEPS2BF16); lanes past `count` read nothing and give zero.

inline __mmask16 first_lanes(int count) {
    return count >= 16 ? __mmask16(0xffff) : __mmask16((1u << (count > 0 ? count : 0)) - 1);
}

// Two vectors of 16 floats rounded as one VCVTNE2PS2BF16 (the same rounding as VCVTNEPS2BF16):
// `low` into bf16 0-15, `high` into 16-31.
inline __m512i to_bf16_pair(__m512 low, __m512 high) { return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(high, low)); }

// 32 floats (zero past `count`) as 32 bf16 in order.
inline __m512i to_bf16_32(const float* src, int count) {
    if (count >= 32) return to_bf16_pair(_mm512_loadu_ps(src), _mm512_loadu_ps(src + 16));
    return to_bf16_pair(_mm512_maskz_loadu_ps(first_lanes(count), src), _mm512_maskz_loadu_ps(first_lanes(count - 16), src + 16));
}

// ---- P as the P V operand --------------------------------------------------------------------

// The softmax writes P rounded to bf16 straight into p_pack (row-major, block_k apart), so the
// rounding costs no pass of its own over the strip.
Operand* probabilities_row(Scratch& s, int block_row, int bk) { return s.p_pack + static_cast<std::size_t>(block_row) * bk; }
inline void store_probabilities(Operand* at, Vec p) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(reinterpret_cast<__m512>(p))));
}
// 2^x for finite x <= 0 as exp2_finite, with a degree-3 polynomial for 2^f on [0, 1) (relative
// error 7.5e-5, fitted on Chebyshev nodes) instead of degree 6: P is rounded to bf16 next, whose
// relative error is up to 2^-8 = 3.9e-3, so the three FMAs saved of the exp pass cost no accuracy
// that survives the rounding. (The row sums take these values unrounded; their error adds 5e-5
// rms to each weight's, against 1.1e-3 rms of the rounding.)
inline Vec exp2_probability(Vec x) {
    constexpr __mmask16 kAllLanes = 0xffff;
    const __m512 xv = reinterpret_cast<__m512>(x);
    const __m512 f = _mm512_maskz_reduce_ps(kAllLanes, xv, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 p = _mm512_set1_ps(7.802451680312898e-2f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.2606716373652236e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.958335376411946e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.999252186969303e-1f));
    return reinterpret_cast<Vec>(_mm512_maskz_scalef_ps(kAllLanes, p, xv));
}

// ---- packing --------------------------------------------------------------------------------

// K and V of (sequence b, K/V head h) in the layouts above, zero past the valid keys up to a
// whole panel and past d_k, d_v.
void pack_keys_values(const Task& t, int b, int h, int keys) {
    const AttentionParams& p = t.p;
    Scratch& s = t.s;
    if (s.packed_seq == b && s.packed_head == h) return;
    const float* kbase = p.k + b * p.k_strides.seq + h * p.k_strides.head;
    const float* vbase = p.v + b * p.v_strides.seq + h * p.v_strides.head;
    const int dk = p.dim_k, dkp = t.layout.dkp, dv = p.dim_v, dvp = t.layout.dvp;
    const int panels = (keys + kNR - 1) / kNR;
    // Keys: 16 keys x 32 depths at a time, as 16 rows of 16 bf16 pairs transposed in registers
    // (a 16 x 16 transpose of 32-bit pairs), so that row k of the result holds pair k of all 16.
    for (int half = 0; half < 2 * panels; ++half) {
        Operand* dst = s.k_pack + static_cast<std::size_t>(half) * (dkp / 2) * 32;
        for (int c0 = 0; c0 < dkp; c0 += 32) {
            Vec rows[16];
            for (int i = 0; i < 16; ++i) {
                const int j = half * 16 + i;
                const __m512i pairs = j < keys ? to_bf16_32(kbase + j * p.k_strides.row + c0, dk - c0) : _mm512_setzero_si512();
                rows[i] = reinterpret_cast<Vec>(pairs);
            }
            transpose_square(rows);
            for (int i = 0; i < 16; ++i) store(reinterpret_cast<float*>(dst + (c0 / 2 + i) * 32), rows[i]);
        }
    }
    // Values: rows 2j and 2j+1 interleaved column by column.
    const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                                21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const int pairs = panels * kNR / 2;
    for (int jj = 0; jj < pairs; ++jj) {
        const int j = 2 * jj;
        Operand* dst = s.v_pack + static_cast<std::size_t>(jj) * dvp * 2;
        for (int c0 = 0; c0 < dvp; c0 += 16) {
            const __mmask16 lanes = first_lanes(dv - c0);
            const __m512 even = j < keys ? _mm512_maskz_loadu_ps(lanes, vbase + j * p.v_strides.row + c0) : _mm512_setzero_ps();
            const __m512 odd = j + 1 < keys ? _mm512_maskz_loadu_ps(lanes, vbase + (j + 1) * p.v_strides.row + c0) : _mm512_setzero_ps();
            const __m512i both = to_bf16_pair(even, odd);
            _mm512_storeu_si512(dst + c0 * 2, _mm512_permutexvar_epi16(interleave, both));
        }
    }
    s.packed_seq = b;
    s.packed_head = h;
}

// The query tile's rows [i0, i0 + rows) rounded into q_pack, zero up to `blocks` row blocks.
struct QueryBlocks {
    const Operand* packed = nullptr;
    int dkp = 0;
    const Operand* rows(int blk) const { return packed + static_cast<std::size_t>(blk) * kMR * dkp; }
};

QueryBlocks stage_queries(const Task& t, int b, int h, int i0, int rows, int blocks) {
    const AttentionParams& p = t.p;
    const int dk = p.dim_k, dkp = t.layout.dkp;
    const float* qbase = p.q + b * p.q_strides.seq + h * p.q_strides.head + i0 * p.q_strides.row;
    for (int r = 0; r < blocks * kMR; ++r) {
        Operand* dst = t.s.q_pack + static_cast<std::size_t>(r) * dkp;
        for (int c0 = 0; c0 < dkp; c0 += 32) {
            const __m512i x = r < rows ? to_bf16_32(qbase + r * p.q_strides.row + c0, dk - c0) : _mm512_setzero_si512();
            _mm512_storeu_si512(dst + c0, x);
        }
    }
    return QueryBlocks{t.s.q_pack, dkp};
}

// ---- S = Q K^T ------------------------------------------------------------------------------

inline __m512bh pair_broadcast(const Operand* at) {
    std::int32_t bits;
    std::memcpy(&bits, at, sizeof bits);
    return reinterpret_cast<__m512bh>(_mm512_set1_epi32(bits));
}
inline __m512bh load_pairs(const Operand* at) { return reinterpret_cast<__m512bh>(_mm512_loadu_si512(at)); }

// The S strip of row block `blk` against the key tile at k0 (see fp32_products.hpp), on AMX
// tiles: the dot-product path makes P in one pass instead (fused_probabilities). The row max is
// left to softmax_row (it would mean reading the strip back here).
int compute_scores(const Task& t, const QueryBlocks& q, int blk, int /*block_rows*/, int k0, int block_count,
                   int /*full_panels*/, Vec* /*row_max*/) {
    Scratch& s = t.s;
    const int dkp = t.layout.dkp, bk = t.layout.bk;
    const Operand* qb = q.rows(blk);
    const std::size_t panel_size = static_cast<std::size_t>(kNR) * dkp;
    {
        for (int panel = 0; panel * kNR < block_count; ++panel) {
            const Operand* kp = s.k_pack + static_cast<std::size_t>(k0 / kNR + panel) * panel_size;
            s.prefetch.step();
            ATTNBATCH_TILE_ZERO(0);
            ATTNBATCH_TILE_ZERO(1);
            for (int c0 = 0; c0 < dkp; c0 += 32) {
                ATTNBATCH_TILE_LOAD(4, qb + c0, dkp * 2);
                ATTNBATCH_TILE_LOAD(5, kp + c0 / 2 * 32, 64);
                ATTNBATCH_TILE_LOAD(6, kp + (dkp / 2 + c0 / 2) * 32, 64);
                ATTNBATCH_TILE_DOT(0, 4, 5);
                ATTNBATCH_TILE_DOT(1, 4, 6);
            }
            ATTNBATCH_TILE_STORE(0, s.s_tile + panel * kNR, bk * 4);
            ATTNBATCH_TILE_STORE(1, s.s_tile + panel * kNR + 16, bk * 4);
        }
    }
    return 0;
}

// ---- S = Q K^T and P in one pass (the dot-product path) ------------------------------------
//
// Each 8 x 32 tile of scores becomes P while it is still in registers: S never goes through
// memory, no pass of its own reads it back, and the exponentials of one tile overlap the next
// tile's dot products out of order. That needs the shift of a row before its largest score is
// known: the row's shift m starts at its first panel's largest scaled score, and a later panel
// whose scaled scores exceed m by more than kShiftSlack raises it by a whole number, the ceiling
// of the excess, rescaling what the row has so far by 2^(m_old - m_new) (the conditional rescale
// FlashAttention-4 uses). Every rescale is a power of two: exact on bf16 P, fp32 weights and
// sums, and on O through alpha. P is at most 2^kShiftSlack before normalisation, and exactly 1
// at the largest score of a row that sees at most one panel, as in the plain computation. A row's shifts follow
// from its own scores alone, in key order, so its bits do not depend on other rows, thread
// counts or row splits.
constexpr float kShiftSlack = 8.0f;

// The first `count` of a panel's 32 lanes (count may be < 0 or > 32).
inline std::uint32_t visible_lanes(int count) {
    return count >= 32 ? 0xffffffffu : (count <= 0 ? 0u : (1u << count) - 1);
}

// The largest scaled score of a row's visible lanes.
inline float largest(__m512 a0, __m512 a1, std::uint32_t lanes, float factor) {
    const __m512 lowest = _mm512_set1_ps(kNegInf);
    const __m512 lo = _mm512_mask_mov_ps(lowest, static_cast<__mmask16>(lanes), a0);
    const __m512 hi = _mm512_mask_mov_ps(lowest, static_cast<__mmask16>(lanes >> 16), a1);
    return hmax(reinterpret_cast<Vec>(_mm512_max_ps(lo, hi))) * factor;
}

// exp2_probability on the lanes of `keep`, zero on the others.
inline __m512 exp2_kept(__m512 x, __mmask16 keep) {
    const __m512 f = _mm512_maskz_reduce_ps(keep, x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 p = _mm512_set1_ps(7.802451680312898e-2f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.2606716373652236e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.958335376411946e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.999252186969303e-1f));
    return _mm512_maskz_scalef_ps(keep, p, x);
}

// A row's P so far in this key tile (p_row[0, cols), bf16), its weights (w_row, fp32, or null)
// and its partial sums, times 2^d for a whole d < 0.
__attribute__((noinline)) void rescale_row(Operand* p_row, float* w_row, Vec* sum, Vec* operand_sum, int cols, float d) {
    constexpr __mmask16 kAll = 0xffff;
    const __m512 by = _mm512_set1_ps(d);
    for (int j = 0; j < cols; j += 32) {
        const __m512i bits = _mm512_loadu_si512(p_row + j);
        const __m512 lo = reinterpret_cast<__m512>(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(bits)), 16));
        const __m512 hi = reinterpret_cast<__m512>(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(bits, 1)), 16));
        _mm512_storeu_si512(p_row + j, to_bf16_pair(_mm512_maskz_scalef_ps(kAll, lo, by), _mm512_maskz_scalef_ps(kAll, hi, by)));
        if (w_row) {
            _mm512_storeu_ps(w_row + j, _mm512_maskz_scalef_ps(kAll, _mm512_loadu_ps(w_row + j), by));
            _mm512_storeu_ps(w_row + j + 16, _mm512_maskz_scalef_ps(kAll, _mm512_loadu_ps(w_row + j + 16), by));
        }
    }
    *sum = reinterpret_cast<Vec>(_mm512_maskz_scalef_ps(kAll, reinterpret_cast<__m512>(*sum), by));
    *operand_sum = reinterpret_cast<Vec>(_mm512_maskz_scalef_ps(kAll, reinterpret_cast<__m512>(*operand_sum), by));
}

// sum + the 32 bf16 of `pair` added up two by two into its 16 lanes: one VDPBF16PS against ones
// (a bf16 times one is exact).
inline Vec add_pairs(Vec sum, __m512i pair) {
    const __m512bh ones = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3f80));
    return reinterpret_cast<Vec>(_mm512_dpbf16_ps(reinterpret_cast<__m512>(sum), reinterpret_cast<__m512bh>(pair), ones));
}

// Eight rows of a row block in the fused pass: where their P, weights and state live.
struct FusedRows {
    Operand* p;        // P of the first row at the panel's column 0 of the tile; rows bk apart
    int ldp;
    float* w;          // weights strip of the first row at the tile's column 0, or null; lkp apart
    int ldw;
    const int* keys;   // each row's visible keys, counted from the tile's first
    float* shift;      // each row's m (the running shift, whole or -inf before its first key)
    Vec* sums;         // each row's partial sum of P over this tile (the exponentials)
    Vec* operand_sums; // the same of P rounded to bf16, as P V reads it
};

// Row m's scaled scores less its shift (x, 32 lanes) exceed kShiftSlack in a visible lane: its
// shift rises to the ceiling of their largest, what the row has so far in this tile is
// rescaled, and x follows.
__attribute__((noinline)) void raise_shift(__m512* x, std::uint32_t lanes, const FusedRows& rows, int m, int col) {
    // The rescale takes the whole number itself: the new shift, old + rise rounded to a float,
    // may not differ from the old one by exactly `rise` (VSCALEFPS would then scale by a power
    // too many); that rounding moves later exponents by at most an ulp of the shift.
    const float rise = __builtin_ceilf(largest(x[0], x[1], lanes, 1.0f));
    float* w_row = rows.w ? rows.w + static_cast<std::size_t>(m) * rows.ldw : nullptr;
    rescale_row(rows.p + static_cast<std::size_t>(m) * rows.ldp, w_row, &rows.sums[m], &rows.operand_sums[m], col, -rise);
    rows.shift[m] += rise;
    const __m512 by = _mm512_set1_ps(-rise);
    x[0] = _mm512_add_ps(x[0], by);
    x[1] = _mm512_add_ps(x[1], by);
}

// Rows [0, 8) of `rows` against one panel (32 keys at tile column `col`): scores on VDPBF16PS as
// scores_8x32, then P = 2^(S * factor - m) rounded to bf16 into the rows' P, zero past each
// row's visible keys.
template <bool kAllVisible, bool kWeights>
inline void probabilities_8x32(const Operand* q, int dkp, int depth_pairs, const Operand* panel, int col,
                               const FusedRows& rows, float factor, bool first) {
    __m512 acc[8][2];
    for (int m = 0; m < 8; ++m) acc[m][0] = acc[m][1] = _mm512_setzero_ps();
    const Operand* b0 = panel;
    const Operand* b1 = panel + static_cast<std::size_t>(dkp / 2) * 32;
    for (int kk = 0; kk < depth_pairs; ++kk) {
        const __m512bh lo = load_pairs(b0 + kk * 32), hi = load_pairs(b1 + kk * 32);
#pragma GCC unroll 8
        for (int m = 0; m < 8; ++m) {
            const __m512bh a = pair_broadcast(q + m * dkp + 2 * kk);
            acc[m][0] = _mm512_dpbf16_ps(acc[m][0], a, lo);
            acc[m][1] = _mm512_dpbf16_ps(acc[m][1], a, hi);
        }
    }
    if (first) {  // the tile's first panel: every row that sees a key sees this one's first
        for (int m = 0; m < 8; ++m) {
            const std::uint32_t lanes = visible_lanes(rows.keys[m] - col);
            if (lanes != 0) rows.shift[m] = largest(acc[m][0], acc[m][1], lanes, factor);
        }
    }
    const __m512 scale = _mm512_set1_ps(factor);
    const __m512 slack = _mm512_set1_ps(kShiftSlack);
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
        const std::uint32_t lanes = kAllVisible ? 0xffffffffu : visible_lanes(rows.keys[m] - col);
        const __mmask16 keep0 = static_cast<__mmask16>(lanes), keep1 = static_cast<__mmask16>(lanes >> 16);
        // x = S * factor - m; a row that sees none of the panel has P = 0 (its shift may still be
        // -inf: its x is not used).
        const __m512 shift = _mm512_set1_ps(rows.shift[m]);
        __m512 x[2] = {_mm512_fmsub_ps(acc[m][0], scale, shift), _mm512_fmsub_ps(acc[m][1], scale, shift)};
        if (__builtin_expect((_mm512_mask_cmp_ps_mask(keep0, x[0], slack, _CMP_GT_OQ) |
                              _mm512_mask_cmp_ps_mask(keep1, x[1], slack, _CMP_GT_OQ)) != 0, 0)) {
            raise_shift(x, lanes, rows, m, col);
        }
        const __m512 e0 = exp2_kept(x[0], keep0), e1 = exp2_kept(x[1], keep1);
        const __m512i p = to_bf16_pair(e0, e1);
        _mm512_storeu_si512(rows.p + static_cast<std::size_t>(m) * rows.ldp + col, p);
        if (kWeights) {
            float* w_row = rows.w + static_cast<std::size_t>(m) * rows.ldw + col;
            _mm512_storeu_ps(w_row, e0);
            _mm512_storeu_ps(w_row + 16, e1);
        }
        rows.sums[m] = rows.sums[m] + reinterpret_cast<Vec>(e0) + reinterpret_cast<Vec>(e1);
        rows.operand_sums[m] = add_pairs(rows.operand_sums[m], p);
    }
}

// probabilities_8x32 for the case at hand: the rows see the whole panel (valid rows come first
// and their keys never fall, so the least of the first and last row's says), weights or not.
inline void panel_probabilities(const Operand* q, int dkp, int depth_pairs, const Operand* panel, int col,
                                const FusedRows& rows, float factor, bool first, bool all_visible) {
    if (all_visible) {
        if (rows.w) probabilities_8x32<true, true>(q, dkp, depth_pairs, panel, col, rows, factor, first);
        else probabilities_8x32<true, false>(q, dkp, depth_pairs, panel, col, rows, factor, first);
    } else {
        if (rows.w) probabilities_8x32<false, true>(q, dkp, depth_pairs, panel, col, rows, factor, first);
        else probabilities_8x32<false, false>(q, dkp, depth_pairs, panel, col, rows, factor, first);
    }
}

// What a row's O is divided by at the end: the sum of its P as P V read it, rounded to bf16 on
// the dot-product path, so that the weights P V applies add up to one (a row of one key gives V
// exactly). The tile path divides by the sum of the unrounded P, as the reference does.
float output_sum(const Scratch& s, int r) { return s.matrix_tiles ? s.l[r] : s.l_operand[r]; }

// Row block `blk` (task rows r0 = blk * MR on) against the key tile at k0 (`tile`), in one pass:
// P into p_pack and each row's m, l and alpha, as compute_scores and softmax_row would leave
// them (see above for how m differs). The dot-product path only: returns false on tiles.
bool fused_probabilities(const Task& t, const QueryBlocks& q, int blk, int k0, int block_count, int tile, float factor) {
    Scratch& s = t.s;
    if (s.matrix_tiles) return false;
    const Layout& layout = t.layout;
    const int dkp = layout.dkp, bk = layout.bk, r0 = blk * kMR;
    const int depth_pairs = (t.p.dim_k + 1) / 2;
    const std::size_t panel_size = static_cast<std::size_t>(kNR) * dkp;
    int keys[kMR];
    float before[kMR];
    Vec* sums = reinterpret_cast<Vec*>(s.row_sums);
    Vec* operand_sums = sums + kMR;
    for (int m = 0; m < kMR; ++m) {
        keys[m] = s.valid_keys[r0 + m] - k0;
        before[m] = s.m[r0 + m];
        sums[m] = operand_sums[m] = Vec{};
    }
    float* w = s.w_strip ? s.w_strip + static_cast<std::size_t>(r0) * layout.lkp + k0 : nullptr;
    const FusedRows top{s.p_pack, bk, w, layout.lkp, keys, s.m + r0, sums, operand_sums};
    const FusedRows bottom{s.p_pack + static_cast<std::size_t>(8) * bk, bk, w ? w + static_cast<std::size_t>(8) * layout.lkp : nullptr,
                           layout.lkp, keys + 8, s.m + r0 + 8, sums + 8, operand_sums + 8};
    const Operand* qb = q.rows(blk);
    for (int panel = 0; panel * kNR < block_count; ++panel) {
        const Operand* kp = s.k_pack + static_cast<std::size_t>(k0 / kNR + panel) * panel_size;
        s.prefetch.step();
        const int col = panel * kNR;
        const bool first = k0 == 0 && panel == 0;
        panel_probabilities(qb, dkp, depth_pairs, kp, col, top, factor, first, imin(keys[0], keys[7]) - col >= kNR);
        s.prefetch.step();
        panel_probabilities(qb + 8 * dkp, dkp, depth_pairs, kp, col, bottom, factor, first, imin(keys[8], keys[15]) - col >= kNR);
    }
    for (int m = 0; m < kMR; ++m) {
        const int r = r0 + m;
        const float alpha = s.m[r] == before[m] ? 1.0f : exp2_scalar(before[m] - s.m[r]);  // 0 on a row's first keys
        s.alpha[r] = alpha;
        s.l[r] = s.l[r] * alpha + hsum(sums[m]);
        s.l_operand[r] = s.l_operand[r] * alpha + hsum(operand_sums[m]);
        if (s.w_strip && s.valid_keys[r] > 0) s.w_tile_max[r * layout.key_tiles + tile] = s.m[r];
    }
    return true;
}

// ---- O = O * alpha + P V --------------------------------------------------------------------

// Rows [m0, m0 + 8) of O, columns [c0, c0 + 32) on VDPBF16PS; kFresh: O = P V, O not read.
template <bool kFresh>
inline void values_8x32(float* o, int ldo, const float* alpha, const Operand* pb, int ldp, const Operand* v, int dvp,
                        int key_pairs, int c0) {
    __m512 acc[8][2];
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
        const __m512 a = _mm512_set1_ps(alpha[m]);
        acc[m][0] = kFresh ? _mm512_setzero_ps() : _mm512_mul_ps(_mm512_loadu_ps(o + m * ldo + c0), a);
        acc[m][1] = kFresh ? _mm512_setzero_ps() : _mm512_mul_ps(_mm512_loadu_ps(o + m * ldo + c0 + 16), a);
    }
    for (int jj = 0; jj < key_pairs; ++jj) {
        const Operand* row = v + static_cast<std::size_t>(jj) * dvp * 2 + c0 * 2;
        const __m512bh lo = load_pairs(row), hi = load_pairs(row + 32);
#pragma GCC unroll 8
        for (int m = 0; m < 8; ++m) {
            const __m512bh a = pair_broadcast(pb + m * ldp + 2 * jj);
            acc[m][0] = _mm512_dpbf16_ps(acc[m][0], a, lo);
            acc[m][1] = _mm512_dpbf16_ps(acc[m][1], a, hi);
        }
    }
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
        _mm512_storeu_ps(o + m * ldo + c0, acc[m][0]);
        _mm512_storeu_ps(o + m * ldo + c0 + 16, acc[m][1]);
    }
}

// As values_8x32 for the last 16 columns when dvp is not a multiple of 32.
template <bool kFresh>
inline void values_8x16(float* o, int ldo, const float* alpha, const Operand* pb, int ldp, const Operand* v, int dvp,
                        int key_pairs, int c0) {
    __m512 acc[8];
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
        acc[m] = kFresh ? _mm512_setzero_ps() : _mm512_mul_ps(_mm512_loadu_ps(o + m * ldo + c0), _mm512_set1_ps(alpha[m]));
    }
    for (int jj = 0; jj < key_pairs; ++jj) {
        const __m512bh b = load_pairs(v + static_cast<std::size_t>(jj) * dvp * 2 + c0 * 2);
#pragma GCC unroll 8
        for (int m = 0; m < 8; ++m) acc[m] = _mm512_dpbf16_ps(acc[m], pair_broadcast(pb + m * ldp + 2 * jj), b);
    }
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) _mm512_storeu_ps(o + m * ldo + c0, acc[m]);
}

// O rows [r0, r0 + MR) = O * alpha + P V over keys [k0, k0 + block_count): P the block's rows in
// p_pack, rounded there by the softmax (zero past each row's visible keys up to a whole panel).
// At k0 = 0 O is started from zero, not read (see fp32_products.hpp).
void accumulate_values(const Task& t, int r0, int /*block_rows*/, int k0, int block_count) {
    Scratch& s = t.s;
    const int dvp = t.layout.dvp, bk = t.layout.bk;
    const int width = static_cast<int>(round_up(block_count, kNR));
    const bool fresh = k0 == 0;
    float* o = s.o_acc + static_cast<std::size_t>(r0) * dvp;
    const Operand* v = s.v_pack + static_cast<std::size_t>(k0 / 2) * dvp * 2;
    if (s.matrix_tiles) {
        // O * alpha in place, then up to four 16-column C tiles at a time share each P tile.
        for (int r = 0; r < kMR && !fresh; ++r) {
            const __m512 a = _mm512_set1_ps(s.alpha[r0 + r]);
            float* row = o + static_cast<std::size_t>(r) * dvp;
            for (int c = 0; c < dvp; c += 16) _mm512_storeu_ps(row + c, _mm512_mul_ps(_mm512_loadu_ps(row + c), a));
        }
        for (int c0 = 0; c0 < dvp; c0 += 64) {
            const int tiles = imin(4, (dvp - c0) / 16);
            s.prefetch.step();
            if (fresh) {
                ATTNBATCH_TILE_ZERO(0);
                if (tiles > 1) ATTNBATCH_TILE_ZERO(1);
                if (tiles > 2) ATTNBATCH_TILE_ZERO(2);
                if (tiles > 3) ATTNBATCH_TILE_ZERO(3);
            } else {
                ATTNBATCH_TILE_LOAD(0, o + c0, dvp * 4);
                if (tiles > 1) ATTNBATCH_TILE_LOAD(1, o + c0 + 16, dvp * 4);
                if (tiles > 2) ATTNBATCH_TILE_LOAD(2, o + c0 + 32, dvp * 4);
                if (tiles > 3) ATTNBATCH_TILE_LOAD(3, o + c0 + 48, dvp * 4);
            }
            for (int j0 = 0; j0 < width; j0 += 32) {
                const Operand* vb = v + static_cast<std::size_t>(j0 / 2) * dvp * 2 + c0 * 2;
                ATTNBATCH_TILE_LOAD(4, s.p_pack + j0, bk * 2);
                ATTNBATCH_TILE_LOAD(5, vb, dvp * 4);
                ATTNBATCH_TILE_DOT(0, 4, 5);
                if (tiles > 1) {
                    ATTNBATCH_TILE_LOAD(6, vb + 32, dvp * 4);
                    ATTNBATCH_TILE_DOT(1, 4, 6);
                }
                if (tiles > 2) {
                    ATTNBATCH_TILE_LOAD(5, vb + 64, dvp * 4);
                    ATTNBATCH_TILE_DOT(2, 4, 5);
                }
                if (tiles > 3) {
                    ATTNBATCH_TILE_LOAD(6, vb + 96, dvp * 4);
                    ATTNBATCH_TILE_DOT(3, 4, 6);
                }
            }
            ATTNBATCH_TILE_STORE(0, o + c0, dvp * 4);
            if (tiles > 1) ATTNBATCH_TILE_STORE(1, o + c0 + 16, dvp * 4);
            if (tiles > 2) ATTNBATCH_TILE_STORE(2, o + c0 + 32, dvp * 4);
            if (tiles > 3) ATTNBATCH_TILE_STORE(3, o + c0 + 48, dvp * 4);
        }
        return;
    }
    const int key_pairs = (block_count + 1) / 2;  // P is zero past block_count: those add exactly 0
    for (int m0 = 0; m0 < kMR; m0 += 8) {
        const Operand* pb = s.p_pack + static_cast<std::size_t>(m0) * bk;
        float* om = o + static_cast<std::size_t>(m0) * dvp;
        int c0 = 0;
        for (; c0 + 32 <= dvp; c0 += 32) {
            s.prefetch.step();
            if (fresh) values_8x32<true>(om, dvp, s.alpha + r0 + m0, pb, bk, v, dvp, key_pairs, c0);
            else values_8x32<false>(om, dvp, s.alpha + r0 + m0, pb, bk, v, dvp, key_pairs, c0);
        }
        if (c0 < dvp && fresh) values_8x16<true>(om, dvp, s.alpha + r0 + m0, pb, bk, v, dvp, key_pairs, c0);
        if (c0 < dvp && !fresh) values_8x16<false>(om, dvp, s.alpha + r0 + m0, pb, bk, v, dvp, key_pairs, c0);
    }
}

}  // namespace
}  // namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE
