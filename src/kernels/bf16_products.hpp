// The two matrix products of the blocked kernel on bf16 operands with fp32 accumulation, for the
// bf16 backend (blocked_avx512_bf16.cpp): Q, K and V rounded to bfloat16 once, when packed; P
// rounded to bfloat16 after the softmax, which stays in fp32 (blocked_attention.hpp), as do the
// running max and sum and O. It defines the names fp32_products.hpp lists.
//
// Operands are laid out for AMX tiles (Intel SDM vol. 1 ch. 18; TDPBF16PS): an A tile is 16
// rows of 32 bf16 (64 bytes), a B tile 16 rows of 16 column pairs (VNNI: the two bf16 of one
// column and depth 2k, 2k+1 side by side), a C tile 16 x 16 fp32.
//   q_pack  the query tile, row-major (bq, dkp), dkp = d_k rounded up to 32, zero-padded
//   k_pack  per panel of 32 keys, two halves of 16 keys, each (dkp/2 pairs, 16 keys, 2)
//   v_pack  (key pairs, dvp, 2): for keys 2j, 2j+1 the two values of each column side by side
//   p_pack  one row block's P, row-major (16, block_k)
// AVX512-BF16's VDPBF16PS reads the same layouts: a B row is one zmm, an A pair one broadcast.
// So the two paths differ only in the instructions of compute_scores and accumulate_values.
// Tiles need the OS's permission (KernelOptions::amx_permitted); without it, or without AMX,
// the dot-product path runs. Each C element accumulates its products in depth order on both
// paths, but the hardware's rounding inside one instruction's pair of products is its own, so
// the two paths may differ in the last bits: results are bit-identical for any thread count
// and row split on one path, and the resume identity records which path ran (matrix_unit).
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
inline __m256i to_bf16(const float* src, int count) {
    const __mmask16 mask = count >= 16 ? __mmask16(0xffff) : __mmask16((1u << (count > 0 ? count : 0)) - 1);
    return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, src)));
}

// 32 floats (zero past `count`) as 32 bf16 in order.
inline __m512i to_bf16_32(const float* src, int count) {
    const __m256i lo = to_bf16(src, count);
    const __m256i hi = to_bf16(src + 16, count - 16);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
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
// relative error is up to 2^-9 = 2e-3, so the three FMAs saved of the exp pass cost no accuracy
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
            const __m256i even = j < keys ? to_bf16(vbase + j * p.v_strides.row + c0, dv - c0) : _mm256_setzero_si256();
            const __m256i odd = j + 1 < keys ? to_bf16(vbase + (j + 1) * p.v_strides.row + c0, dv - c0) : _mm256_setzero_si256();
            const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(even), odd, 1);
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
        for (int c0 = 0; c0 < dkp; c0 += 16) {
            const __m256i x = r < rows ? to_bf16(qbase + r * p.q_strides.row + c0, dk - c0) : _mm256_setzero_si256();
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + c0), x);
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

// Rows [m0, m0 + 8) of the block against one panel (32 keys) on VDPBF16PS: 8 x 2 accumulators.
inline void scores_8x32(const Operand* q, int dkp, int depth_pairs, const Operand* panel, float* c, int ldc,
                        bool take_max, Vec* row_max) {
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
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
        _mm512_storeu_ps(c + m * ldc, acc[m][0]);
        _mm512_storeu_ps(c + m * ldc + 16, acc[m][1]);
        if (take_max) {
            const Vec a0 = reinterpret_cast<Vec>(acc[m][0]), a1 = reinterpret_cast<Vec>(acc[m][1]);
            Vec mx = row_max[m];
            mx = a0 > mx ? a0 : mx;
            mx = a1 > mx ? a1 : mx;
            row_max[m] = mx;
        }
    }
}

// The S strip of row block `blk` against the key tile at k0 (see fp32_products.hpp). On tiles
// the row max is left to softmax_row (it would mean reading the strip back here).
int compute_scores(const Task& t, const QueryBlocks& q, int blk, int /*block_rows*/, int k0, int block_count,
                   int full_panels, Vec* row_max) {
    Scratch& s = t.s;
    const int dkp = t.layout.dkp, bk = t.layout.bk;
    const Operand* qb = q.rows(blk);
    const std::size_t panel_size = static_cast<std::size_t>(kNR) * dkp;
    if (s.matrix_tiles) {
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
        return 0;
    }
    const int depth_pairs = (t.p.dim_k + 1) / 2;  // pairs past d_k are zero on both sides
    for (int panel = 0; panel * kNR < block_count; ++panel) {
        const Operand* kp = s.k_pack + static_cast<std::size_t>(k0 / kNR + panel) * panel_size;
        s.prefetch.step();
        const bool take_max = panel < full_panels;
        scores_8x32(qb, dkp, depth_pairs, kp, s.s_tile + panel * kNR, bk, take_max, row_max);
        scores_8x32(qb + 8 * dkp, dkp, depth_pairs, kp, s.s_tile + 8 * bk + panel * kNR, bk, take_max, row_max + 8);
    }
    return full_panels * kNR;
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
