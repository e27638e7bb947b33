// The blocked attention kernel: out = softmax(Q K^T * scale) V per (sequence, head), with the
// masks, lse and weights of attention.hpp. Written once over GCC vector extensions and compiled
// once per backend (blocked_portable.cpp, blocked_avx2.cpp, blocked_avx512.cpp through
// blocked_backend.hpp; blocked_avx512_bf16.cpp); read it from forward() at the bottom upwards.
// The including file first includes a products header, which defines the two matrix products
// and the packing of their operands (see fp32_products.hpp for the names it must define):
//   fp32_products.hpp      fp32 operands on the register micro-kernels (micro_kernels.hpp)
//   bf16_products.hpp      bf16 operands on AMX tiles or AVX512-BF16 dot products
// The other pieces it stands on:
//   simd.hpp               vectors of the backend's width, 2^x, reductions, transposes, f16
//   micro_kernels.hpp      the MR x NR register tiles of Q K^T and of P V
//   blocked_workspace.hpp  tile sizes and the per-thread scratch carved from the workspace
//   prefetch.hpp           which task a thread runs next, and L2 prefetches of its rows
//
// Checked against reference_attention.cpp, reference_attention_f64: every logit in double and a
// plain three-pass softmax per row. tests/kernels runs every backend of the build against it
// (accuracy, masks, tiles, weights, determinism across thread counts) with tolerances derived
// from a naive fp32 run of the same problem; `attnbatch verify` recomputes real outputs with it.
// Speed: `attnbatch bench`, and scripts/bench_kernel.sh (BASE=other/attnbatch: interleaved A/B).
//
// Per task (sequence, head, query tile), per key tile and per row block of MR queries,
// FlashAttention's online softmax (Dao et al., arXiv 2205.14135; Milakov & Gimelshein,
// arXiv 1805.02867), with c = scale * log2(e):
//   S = Q K^T                          register-blocked MR x NR micro-kernel over packed key
//                                      panels; it also takes the row max, with each row's
//                                      keys past the mask's edge set to -inf (fp32)
//   m' = max(m, c rowmax S); P = 2^(c S - m'); l' = l * 2^(m - m') + rowsum P
//   O' = O * 2^(m - m') + P V          the rescale is fused into the P.V micro-kernel
// and at the end O / l and lse = ln 2 * (m + log2 l). The row block's S strip stays in L1 from
// Q K^T to P V, and the data of the thread's next task is prefetched into L2 meanwhile. One
// thread owns a task from start to end and every reduction runs in a fixed order, so results do
// not depend on the thread count. A products header may make P in the same pass as S instead
// (fused_probabilities: the bf16 dot-product path), with a lazily raised shift in place of the
// exact row max m (bf16_products.hpp says how).
//
// Weights need the row's final max and sum, known only after the last key tile. Instead of a
// second QK^T pass, each tile's P is kept in a per-thread row strip (block_q x Lk floats, never
// L x L) with the running max it was taken against; the strip is rescaled by
// 2^(m_tile - m_final) / l when the rows are done.
//
// Versions (git log -- src/kernels); a version that changes bf16 bits also raises
// kBf16BitsVersion (attention.hpp), by which bf16 runs resume. Fractions are of the one-core
// FMA peak that `bench` measures, B = 8, H = 8, L = 512, d = 64, one thread, AVX-512; sittings
// differ by up to 0.1.
//   1 78ca805  The online softmax above, tile by tile: Q K^T for a whole query tile into a
//              block_q x block_k S tile, then its softmax, then P V; Q scaled and transposed into
//              (d_k, MR) blocks for the micro-kernel.
//   2 0de8059  One broadcast instruction per splat, exp2 by scalef, shuffle-tree reductions; Q
//              kept row-major (the micro-kernel's MR broadcasts read rows side by side, no
//              transpose); whole (sequence, head) groups per thread when there are enough, so K
//              and V are packed once per group; weights finished in one pass.
//   3 3c05262  Longer key tiles (AVX-512: 96 x 128 to 96 x 512), so the per-row softmax
//              bookkeeping is paid once per 512 keys; a P V micro-tile width of its own.
//              0.53 of peak, 90.9 GFLOP/s (an earlier sitting, docs/performance-log.md "History").
//   4 623e931  Row-block order: Q K^T, softmax and P V one block of MR rows at a time, so the
//              block's S strip (MR x block_k, 24 KiB) stays in L1; the S scratch shrinks to it.
//   5 b545a7c  AVX-512 exp2 by VREDUCEPS (x - floor x) and VSCALEFPS instead of VRNDSCALEPS, a
//              subtraction and scalef; the polynomial refitted on [0, 1).
//   6 5ef63a7  Row max fused into the Q K^T epilogue for panels every row of the block sees
//              whole (the softmax scans only the rest); the exp pass unrolled.
//   7 24ec56e  Q read in place: scale * log2(e) folded into the exponent's FMA instead of a
//              scaled copy of Q; the thread's next task's Q, K and V prefetched into L2.
//   8 1216bb4  Prefetches a few cache lines per micro-kernel call and softmax row (smaller
//              bursts); full key panels transposed in registers (kLanes x kLanes shuffles)
//              instead of scalar stores. (Prefetching the next task's output rows as well,
//              982c794, was neutral to -1% and dropped again in edf2630.)
//   9 9b2ac6c  The prefetch walks cache lines with one pointer, contiguous rows as one range:
//              +2.7% CPU time in an A/B. 0.62 of peak, 98.6 GFLOP/s, 6.7x numpy and 7.9x
//              PyTorch on one core (docs/performance-log.md "Kernel against numpy and PyTorch").
//  10 f9d6b03  Split into this file and the headers above; registered as backends (7c9ab10:
//              backend.hpp, backends.cpp); scratch sized by the weights mode (b8a163e). The same
//              arithmetic in the same order: outputs byte-identical to version 9.
//  11 8dcf633  The two matrix products and their operands' packing moved to a products header
//              (fp32_products.hpp), so that a backend of other operands brings its own: the
//              bf16 backend (bf16_products.hpp, AMX tiles or AVX512-BF16, `--precision bf16`)
//              is its file, that header, a table row and a CMake line. fp32 outputs
//              byte-identical to version 10; bf16 at about 1.6x the fp32 rate on AVX512-BF16
//              (an AMD Zen 5 here, no AMX), B = 8, H = 8, L = 512, d = 64, one thread.
//  12 adccd60  fp32: a causal row block's last key panel computed half wide (MR x NR/2) when
//              the block needs at most half of it, and a row block of at most 8 valid rows (the
//              last of 512 in blocks of 12) on an 8-row micro-tile (micro_kernels.hpp templates):
//              the Q K^T work past the causal triangle from 9.3% to 4.6%, P V's from 3.9% to
//              2.3%. Outputs byte-identical. A/B (bench_kernel.sh 7): causal x1.019 at L = 512
//              and x1.018 at L = 2048, full x1.004; causal / full still 0.82-0.87 at L = 512 (1
//              and 2 threads, noisy sittings): the rest of the gap is not the diagonal's FLOPs.
//  13          bf16: P rounded to bf16 by the softmax pass itself, straight into p_pack (no
//              fp32 P strip read back and converted before P V); its 2^x on a degree-3
//              polynomial (P's rounding to bf16 dwarfs its 7.5e-5 error); key tiles of 512
//              (default tiles 128 x 512: the per-row bookkeeping once per 512 keys). Both: a row
//              block's first P V starts O from zero instead of reading a cleared o_acc (no
//              memset of the bq x d_v accumulator per task). fp32 outputs byte-identical; bf16
//              bits change (NMSE against fp64 1.116e-5 -> 1.126e-5 over 64 heads). Same-process
//              A/B on CPU time (the kernel built twice, 31 interleaved calls): bf16 x1.09, fp32
//              x1.02 full and causal; bf16 / fp32 about 1.7 at L = 512, 1 thread.
//  14          The next task's rows reach L2 (prefetch.hpp): one load per page of the input rows
//              it will read before they are prefetched (prefetches to pages without a cached
//              translation were dropped here), its output rows prefetched for writing too, the
//              next head's keys and values prefetched in shares that follow each task's work
//              (with a causal mask the last tiles are the dear ones) over a better count of
//              each task's prefetch steps; fp32 values read where they are when their rows
//              need no padding (no copy into v_pack). Outputs byte-identical. Same-process A/B
//              (both builds' code 64-byte aligned: unaligned, two copies of the same code
//              differed by up to 8% with a causal mask): fp32 x1.02 full, x1.07-1.08 causal;
//              bf16 x1.01-1.02 full, x1.06-1.09 causal; the CLI's [B, L, H*d] layout x1.00-1.02
//              full, x1.02-1.03 causal. Causal / full about 0.87-0.89 (host loaded).
//  15          bf16 on AVX512-BF16: S = Q K^T and P in one pass (bf16_products.hpp,
//              fused_probabilities): each 8 x 32 tile of scores becomes P in registers, against
//              a shift per row that starts at its first panel's largest scaled score and rises by
//              whole numbers only when a later panel exceeds it by more than 8 (rescales are
//              powers of two, exact); O is divided by the sum of P as rounded to bf16, so that P
//              V's weights add up to one; the shift test and the masks only where a panel is not
//              whole to every row; Q, K, V rounded two vectors per VCVTNE2PS2BF16. bf16 bits
//              change (NMSE against fp64 over 64 heads 1.126e-5 -> 1.163e-5, floor 1.126e-5);
//              fp32 outputs byte-identical. Same-process A/B against version 14 (CPU time,
//              paired ratios of 31 interleaved calls, 1 thread): bf16 x1.01-1.02 full, x1.02-1.05
//              causal.
//  16          fp32: the mask's edge in the Q K^T micro-kernel's registers: a panel some row of
//              the block sees only in part stores -inf past each row's visible keys and takes the
//              row max too, so that softmax_row reads every row of a block over the same whole
//              vectors, 2^-inf giving the masked zeros, instead of scanning the rest for the max,
//              masking the vector that straddles each row's edge and zeroing up to the panel's
//              (loops whose trip counts changed from row to row). Outputs byte-identical (fp32
//              on AVX-512, AVX2 and portable, causal and ragged). kernel_ab.sh, 21 rounds: fp32
//              causal x1.017 on 1 thread, x1.021 on 2; full x0.995-1.010.
//  17          Output rows streamed past the caches (non-temporal stores: simd.hpp stream())
//              when they are whole vectors on vector bounds, and no longer prefetched for
//              writing: the kernel never reads them back, so each line is no longer fetched
//              before it is written nor evicted dirty later. Outputs byte-identical (fp32, bf16,
//              causal, projections and maps, AVX2, portable). `BASE=<before> bench_precision.sh
//              11`, three sittings, new / base: two threads fp32 x1.017-1.021, bf16
//              x1.013-1.030, causal x1.017-1.042; one thread causal x1.013-1.030, bf16
//              x1.002-1.009, fp32 x0.997-0.998. kernel_ab.sh (its tensors now on 2 MiB bounds, as
//              runs' are), 21 rounds: one thread x1.004-1.020, two x1.007-1.029.
//  18          AVX-512 fp32: 8 x 32 micro-tiles instead of 12 x 32 (ATTNBATCH_MR), query tiles of
//              128 rows instead of 96 (blocked_avx512.cpp). The same operations per element in the
//              same order: outputs byte-identical (fp32, causal, ragged, projections, all and
//              mean maps, f16 maps). kernel_ab.sh, 15 rounds, L = 512: one thread fp32 x1.016
//              full, x1.030 causal; two threads x1.027 and x1.035; L = 256 x1.029 and x1.057;
//              L = 2048 x1.018 and x1.025; bf16 (its own 16-row blocks) unchanged. 8 x 32 alone
//              (96-row tiles): x1.004-1.016 full, x1.020-1.026 causal; 6 x 32 x1.004 and
//              x1.014; 10 x 32 x0.998 and x0.993; 4 x 64 x1.015 and x1.012.
//  19          AVX-512 fp32 on Intel cores: 12 x 32 micro-tiles again (blocked_avx512_rows12.cpp;
//              version 18's 8 x 32 on others, isa.hpp avx512_row_block), query tiles of 128 rows
//              (132 with 12-row blocks; 96 ran alike). An Intel Xeon with AMX (2026-12-07) feeds
//              the 8-row micro-kernel its key panels from L2 at 0.67 of the FMA peak, 0.75 from
//              L1. Outputs byte-identical. bench, 9 interleaved rounds: one thread x1.051 full,
//              x1.022 causal; two threads x1.021 both. kernel_ab.sh, 11 rounds: x1.051, x1.015.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnbatch/kernels/attention.hpp"
#include "blocked_workspace.hpp"
#include "prefetch.hpp"
#include "simd.hpp"

namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE {
namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr double kLn2 = 0.6931471805599453;

// Rows of q (positions q_offset, q_offset + 1, ...) that lie inside the sequence.
int valid_queries(const AttentionParams& p, int b) {
    return p.lengths ? imax(0, imin(p.lengths[b] - p.q_offset, p.len_q)) : p.len_q;
}
int valid_keys(const AttentionParams& p, int b) { return p.lengths ? imin(p.lengths[b], p.len_k) : p.len_k; }

// Whether every output row is whole vectors on vector bounds, so that the rows are streamed out
// (stream()) rather than stored through the caches.
bool streams_output(const AttentionParams& p) {
    constexpr std::size_t kBytes = ATTNBATCH_VECTOR_BYTES;
    const auto on_bound = [](std::ptrdiff_t floats) { return (static_cast<std::size_t>(floats) * sizeof(float)) % kBytes == 0; };
    return kStreamStores && p.dim_v % kLanes == 0 && reinterpret_cast<std::uintptr_t>(p.out) % kBytes == 0 &&
           on_bound(p.out_strides.seq) && on_bound(p.out_strides.head) && on_bound(p.out_strides.row);
}

// Online softmax of one row of the S tile: turns the row's scores into P over `width`
// columns (zero past `count` valid ones), written where the products header keeps the P V
// operand (probabilities_row: in place for fp32, rounded to bf16 in p_pack for bf16 on tiles, so
// that P is rounded in this pass rather than read back later), and into `weights_row` too when that
// is not null (fp32, unrounded, `count` columns and zeros up to a whole vector); and updates the
// row's max, sum and rescale factor. The scores are the unscaled Q K^T; `factor` = scale *
// log2(e) > 0 is applied in the exponent's FMA, and m is kept in those scaled units (factor > 0
// commutes with the max).
// `partial_max` holds the lane-wise max of the first `scanned` columns (a multiple of the
// vector width, computed by micro_qk). Where the products header masks the scores
// (kMasksScores), the row holds -inf past `count` up to `scanned`, which covers the row: its
// `scanned` columns are read as whole vectors, 2^-inf giving their zeros, and P past them is
// not read (P V reads the block's visible keys only). Otherwise the rest is scanned and the
// vector straddling `count` masked here, and P is zero up to `width`.
void softmax_row(const float* scores, Operand* probabilities, float* weights_row, int count, int width, float factor,
                 Vec partial_max, int scanned, float& m, float& l, float& alpha) {
    Vec vmax = partial_max;
    int whole = scanned;  // columns read as whole vectors without a mask
    if constexpr (!kMasksScores) {
        int j = scanned;
        for (; j + kLanes <= count; j += kLanes) {
            const Vec x = load(scores + j);
            vmax = x > vmax ? x : vmax;
        }
        if (j < count) {  // the vector straddling `count` (within the strip's row): its visible lanes
            const Vec visible = first_lanes_or(load(scores + j), count - j, splat(kNegInf));
            vmax = visible > vmax ? visible : vmax;
        }
        whole = count / kLanes * kLanes;
    }
    const float tile_max = hmax(vmax);
    const float m_new = fmax_(m, tile_max * factor);
    alpha = exp2_scalar(m - m_new);  // 0 on the first tile, where m = -inf
    const Vec scale = splat(factor);
    const Vec shift = splat(m_new);
    Vec vsum = Vec{};
#pragma GCC unroll 4
    for (int j = 0; j < whole; j += kLanes) {
        const Vec e = exp2_probability(load(scores + j) * scale - shift);
        store_probabilities(probabilities + j, e);
        if (weights_row) store(weights_row + j, e);
        vsum += e;
    }
    if (!kMasksScores && whole < width) {  // the vector straddling `count`, then zeros up to the panel edge
        const Vec e = exp2_probability(load(scores + whole) * scale - shift);
        const Vec kept = first_lanes_or(e, count - whole, Vec{});
        store_probabilities(probabilities + whole, kept);
        if (weights_row) store(weights_row + whole, kept);
        vsum += kept;
        for (int j = whole + kLanes; j < width; j += kLanes) store_probabilities(probabilities + j, Vec{});
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

// Aims the thread's prefetch at the rows `next` reads first (its query tile, and its share of
// the keys and values of (kv_b, kv_h) unless this task works on that head already), a few lines
// per micro-kernel call of this task (rows of `blocks` row blocks, `tile_keys` keys).
void prefetch_next_task(const AttentionParams& p, const Layout& layout, Prefetch& pf, int b, int h, const NextTask& next,
                        int blocks, int tile_keys) {
    pf.clear();
    if (next.b >= 0) {
        const float* q = p.q + next.b * p.q_strides.seq + next.h * p.q_strides.head + next.i0 * p.q_strides.row;
        pf.add(q, p.q_strides.row, imin(layout.bq, p.len_q - next.i0), p.dim_k);
        if (!streams_output(p)) {  // streamed rows need no lines in the cache
            const float* o = p.out + next.b * p.out_strides.seq + next.h * p.out_strides.head + next.i0 * p.out_strides.row;
            pf.add(o, p.out_strides.row, imin(layout.bq, p.len_q - next.i0), p.dim_v, true);
        }
    }
    if (next.kv_b >= 0 && !(next.kv_b == b && kv_head_of(p, next.kv_h) == kv_head_of(p, h))) {
        const int next_kv_h = kv_head_of(p, next.kv_h);
        const long next_keys = valid_keys(p, next.kv_b);
        // With a causal mask a query tile's work grows with its last row squared: the share
        // follows the work, so that cheap tiles do not prefetch as many lines as dear ones.
        auto part = [&](long row) { return p.causal ? row * row / p.len_q : row; };
        const int k_lo = static_cast<int>(next_keys * part(next.kv_row0) / p.len_q);
        const int k_hi = static_cast<int>(next_keys * part(next.kv_row1) / p.len_q);
        pf.add(p.k + next.kv_b * p.k_strides.seq + next_kv_h * p.k_strides.head + k_lo * p.k_strides.row,
               p.k_strides.row, k_hi - k_lo, p.dim_k);
        pf.add(p.v + next.kv_b * p.v_strides.seq + next_kv_h * p.v_strides.head + k_lo * p.v_strides.row,
               p.v_strides.row, k_hi - k_lo, p.dim_v);
    }
    // Prefetch steps of this task (a Q K^T call per key panel of a row block, a softmax row, a
    // P V call per value panel), so that the prefetches finish about three quarters into the
    // task. With a causal mask the tile's rows see bq / 2 keys fewer than its last on average.
    const int mean_keys = p.causal ? imax(tile_keys - blocks * kMR / 2, kNR) : tile_keys;
    long calls = static_cast<long>(blocks) * ((mean_keys + kNR - 1) / kNR + kMR + layout.dvp / kNRpv);
    calls = calls * 3 / 4 > 0 ? calls * 3 / 4 : 1;
    pf.lines_per_step = static_cast<int>((pf.total_lines() + calls - 1) / calls);
    pf.touch_pages();
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
        const int position = p.q_offset + i0 + r;
        row_keys[r] = r < rows ? (p.causal ? imin(keys, position + 1) : keys) : 0;
        s.m[r] = kNegInf;
        s.l[r] = 0.0f;
        s.l_operand[r] = 0.0f;
    }
    const int tile_keys = rows > 0 ? row_keys[rows - 1] : 0;  // rows' key counts never decrease
    if (tile_keys > 0) pack_keys_values(t, b, kv_head_of(p, h), keys);
    const int blocks = (rows + kMR - 1) / kMR;
    QueryBlocks query_blocks{};
    if (tile_keys > 0) query_blocks = stage_queries(t, b, h, i0, rows, blocks);
    const float factor = p.scale * kLog2e;
    prefetch_next_task(p, layout, s.prefetch, b, h, next, blocks, tile_keys);
    for (int k0 = 0, tile = 0; k0 < tile_keys; k0 += layout.bk, ++tile) {
        const int kw = imin(layout.bk, tile_keys - k0);
        // Row block by row block, so that the block's S strip (MR x bk) stays in L1 from Q K^T
        // through the softmax to P V; the key tile is read from L2 once per block.
        for (int blk = 0; blk < blocks; ++blk) {
            const int r0 = blk * kMR;
            const int last = imin(r0 + kMR, rows) - 1;
            const int block_count = imin(imax(row_keys[last] - k0, 0), kw);
            if (block_count == 0) continue;
            if (fused_probabilities(t, query_blocks, blk, k0, block_count, tile, factor)) {
                accumulate_values(t, r0, last - r0 + 1, k0, block_count);
                continue;
            }
            const int width = static_cast<int>(round_up(block_count, kNR));
            // S = Q K^T over the panels some row of the block can see; panels every row of the
            // block sees whole take the row max on the fly, and with kMasksScores the others
            // too, masked; otherwise softmax_row scans the rest.
            const int full_panels = imin(imax(row_keys[r0] - k0, 0), kw) / kNR;
            Vec row_max[kMR];
            for (int m = 0; m < kMR; ++m) row_max[m] = splat(kNegInf);
            const int scanned = compute_scores(t, query_blocks, blk, last - r0 + 1, k0, block_count, full_panels, row_max);
            for (int r = r0; r < r0 + kMR; ++r) {
                const float* srow = s.s_tile + static_cast<std::size_t>(r - r0) * layout.bk;
                Operand* prow = probabilities_row(s, r - r0, layout.bk);
                const int count = r < rows ? imin(imax(row_keys[r] - k0, 0), kw) : 0;
                if (count == 0) {  // nothing visible in this tile: P row is zero, O unchanged
                    std::memset(prow, 0, sizeof(Operand) * width);
                    s.alpha[r] = 1.0f;
                    if (want_weights && r < rows) s.w_tile_max[r * layout.key_tiles + tile] = s.m[r];
                    continue;
                }
                s.prefetch.step();
                float* weights_row = want_weights ? s.w_strip + static_cast<std::size_t>(r) * layout.lkp + k0 : nullptr;
                softmax_row(srow, prow, weights_row, count, width, factor, row_max[r - r0], scanned, s.m[r], s.l[r],
                            s.alpha[r]);
                if (want_weights) s.w_tile_max[r * layout.key_tiles + tile] = s.m[r];
            }
            accumulate_values(t, r0, last - r0 + 1, k0, block_count);
        }
    }
    const bool stream_rows = streams_output(p);
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
        const float inv_l = 1.0f / output_sum(s, r);
        const float* acc = s.o_acc + static_cast<std::size_t>(r) * layout.dvp;
        if (stream_rows) {
            for (int c = 0; c < p.dim_v; c += kLanes) stream(orow + c, load(acc + c) * splat(inv_l));
        } else {
            for (int c = 0; c < p.dim_v; ++c) orow[c] = acc[c] * inv_l;
        }
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

}  // namespace

std::size_t workspace_bytes(const AttentionParams& p, int block_q, int block_k, int threads) {
    return make_layout(p, block_q, block_k).per_thread * static_cast<std::size_t>(threads) + kAlign;
}

void forward(const AttentionParams& p, int block_q, int block_k, int threads, bool amx_permitted, void* workspace) {
    const Layout layout = make_layout(p, block_q, block_k);
    const bool matrix_tiles = matrix_tiles_usable(amx_permitted);
    char* base = reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(workspace), kAlign));
    const bool mean = p.weights_mode == WeightsMode::mean_over_heads;
    const long q_tiles = (p.len_q + layout.bq - 1) / layout.bq;
    const long groups = static_cast<long>(p.batch) * (mean ? 1 : p.heads);
    const long tasks = groups * q_tiles;
    // With enough (sequence, head) groups a thread takes whole groups, so K and V are packed
    // once per group rather than once per thread that touches it; otherwise single tiles, so
    // that a few long sequences still spread over every thread.
    const int chunk = groups >= 4L * threads ? static_cast<int>(q_tiles) : 1;
    // Single causal tiles go dearest first, so that the last ones handed out are the cheapest.
    const bool last_first = p.causal && chunk == 1;
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
        scratch.matrix_tiles = matrix_tiles;
        begin_products(scratch);
        const Task task{p, layout, scratch};
        // Dynamic scheduling only decides who computes a task, never how: results are the same
        // for any thread count.
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, chunk)
#endif
        for (long id = 0; id < tasks; ++id) {
            const int i0 = tile_of(id, q_tiles, last_first) * layout.bq;
            const long seq_head = id / q_tiles;
            const NextTask next = guess_next_task(p, layout.bq, id, q_tiles, tasks, chunk, threads, mean, last_first);
            if (mean) {
                attend_tile_mean(task, static_cast<int>(seq_head), i0, next);
            } else {
                attend_tile(task, static_cast<int>(seq_head / p.heads), static_cast<int>(seq_head % p.heads), i0, next);
            }
        }
        stream_fence();  // this thread's streamed rows, before the region's end lets others read them
        end_products(scratch);
    }
}

}  // namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE
