// The two matrix products of the blocked kernel in fp32, and the packing of their operands:
// S = Q K^T over key panels and O = O * alpha + P V, on the register micro-kernels of
// micro_kernels.hpp. The products header of the fp32 backends (through blocked_backend.hpp);
// blocked_attention.hpp calls what it defines:
//   pack_keys_values   K and V of a (sequence, K/V head) into the thread's packs
//   stage_queries      where each row block of a query tile reads its queries
//   compute_scores     one row block's S strip over a key tile
//   accumulate_values  one row block's O += P V over a key tile
//   probabilities_row, store_probabilities, exp2_probability: where and how the softmax
//                      writes P as the P V operand
//   begin_products, end_products, matrix_tiles_usable: per-thread state (none here)
// bf16_products.hpp defines the same names for bf16 operands.
#pragma once

#include <cstddef>
#include <cstring>

#include "micro_kernels.hpp"

namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE {
namespace {

using Operand = float;
constexpr int kDepthAlign = 1;
constexpr bool kPacksQueryTile = false;
constexpr bool kPacksProbabilities = false;
constexpr bool kMasksScores = true;  // compute_scores masks each row's strip: see there

}  // namespace
}  // namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE

#include "blocked_workspace.hpp"

namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE {
namespace {

bool matrix_tiles_usable(bool /*amx_permitted*/) { return false; }
void begin_products(Scratch& /*s*/) {}
void end_products(Scratch& /*s*/) {}

// P overwrites S in the row block's strip, which micro_pv reads; 2^x as accurate as fp32 allows.
Operand* probabilities_row(Scratch& s, int block_row, int bk) { return s.s_tile + static_cast<std::size_t>(block_row) * bk; }
inline void store_probabilities(float* at, Vec p) { store(at, p); }
inline Vec exp2_probability(Vec x) { return exp2_finite(x); }

// Keys transposed into panels of NR (panel, dk, NR), zero beyond the valid keys so that whole
// panels can be computed, and values into rows padded to dvp, unless they are rows of dvp
// floats one after the other already: then P V reads them where they are (micro_pv reads only
// valid keys), which saves a copy of each head's values: 1-3% of the time of L = 512 tasks,
// 3-4% with a causal mask. (It measured 3-4% slower when the next task's rows were prefetched
// into L2 less well, before version 14.) `h` is a K/V head: the query heads of a group that
// follow each other on a thread share one packing.
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
    if (dv == dvp && p.v_strides.row == dv) {
        s.v_rows = vbase;
        s.v_row_stride = dv;
    } else {
        s.v_rows = s.v_pack;
        s.v_row_stride = dvp;
        for (int j = 0; j < keys; ++j) {
            const float* row = vbase + j * p.v_strides.row;
            float* dst = s.v_pack + static_cast<std::size_t>(j) * dvp;
            std::memcpy(dst, row, sizeof(float) * dv);
            for (int c = dv; c < dvp; ++c) dst[c] = 0.0f;
        }
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

// Where the row blocks of a query tile (rows [i0, i0 + rows) valid) read their queries: in place, except a last row block
// that would run past the end of the query tensor (rows past the tile's valid rows but inside
// the tensor are computed and ignored), which reads q_pack.
struct QueryBlocks {
    const float* base = nullptr;  // the tile's first row
    std::ptrdiff_t ld = 0;
    int direct_blocks = 0;
    const float* packed = nullptr;
    int dim_k = 0;

    const float* rows(int blk) const { return blk < direct_blocks ? base + blk * kMR * ld : packed; }
    std::ptrdiff_t stride(int blk) const { return blk < direct_blocks ? ld : dim_k; }
};

QueryBlocks stage_queries(const Task& t, int b, int h, int i0, int /*rows*/, int blocks) {
    const AttentionParams& p = t.p;
    QueryBlocks q;
    q.base = p.q + b * p.q_strides.seq + h * p.q_strides.head + i0 * p.q_strides.row;
    q.ld = p.q_strides.row;
    q.direct_blocks = imin(blocks, (p.len_q - i0) / kMR);
    q.packed = t.s.q_pack;
    q.dim_k = p.dim_k;
    if (q.direct_blocks < blocks) pack_query_block(t, b, h, i0 + q.direct_blocks * kMR, p.len_q - i0 - q.direct_blocks * kMR);
    return q;
}

// The S strip of one row block on micro-tiles of kRows rows. Panels past the first
// `full_panels` are masked per row (micro_qk's kMasked; `visible`: each row's visible keys from
// the tile's start). A last panel of which the block needs at most half (the diagonal of a
// causal mask, or the end of the keys) is computed half wide: the softmax reads no column of it
// past the block's last visible key.
template <int kRows>
int scores_strip(const Task& t, const float* qb, std::ptrdiff_t ldq, int k0, int block_count, int full_panels,
                 const int* visible, Vec* row_max) {
    Scratch& s = t.s;
    const int dk = t.p.dim_k;
    for (int panel = 0; panel * kNR < block_count; ++panel) {
        const float* kp = s.k_pack + static_cast<std::size_t>(k0 / kNR + panel) * dk * kNR;
        float* strip = s.s_tile + panel * kNR;
        s.prefetch.step();
        if (panel < full_panels) {
            micro_qk<true, kRows>(qb, ldq, kp, dk, strip, t.layout.bk, row_max);
            continue;
        }
        int in_panel[kRows];
        for (int m = 0; m < kRows; ++m) in_panel[m] = visible[m] - panel * kNR;
        if (kNV % 2 == 0 && block_count - panel * kNR <= kNR / 2) {
            micro_qk<true, kRows, kNV / 2, true>(qb, ldq, kp, dk, strip, t.layout.bk, row_max, in_panel);
        } else {
            micro_qk<true, kRows, kNV, true>(qb, ldq, kp, dk, strip, t.layout.bk, row_max, in_panel);
        }
    }
    return static_cast<int>(round_up(block_count, kLanes));
}

// S strip of row block `blk` against the key tile at k0, over the panels some row of the block
// can see, each row's max taken on the fly into row_max. A row's columns past its visible keys
// hold -inf up to the returned width (block_count in whole vectors), so that softmax_row reads
// that width of every row whole (kMasksScores). Only the block's first `block_rows` rows are
// valid queries: the strip's other rows hold no scores.
int compute_scores(const Task& t, const QueryBlocks& q, int blk, int block_rows, int k0, int block_count,
                   int full_panels, Vec* row_max) {
    const float* qb = q.rows(blk);
    const std::ptrdiff_t ldq = q.stride(blk);
    int visible[kMR];
    for (int m = 0; m < kMR; ++m) visible[m] = t.s.valid_keys[blk * kMR + m] - k0;
    if (block_rows <= kTailRows) return scores_strip<kTailRows>(t, qb, ldq, k0, block_count, full_panels, visible, row_max);
    return scores_strip<kMR>(t, qb, ldq, k0, block_count, full_panels, visible, row_max);
}

// What a row's O is divided by at the end: the sum of its P, which P V reads unrounded.
float output_sum(const Scratch& s, int r) { return s.l[r]; }

// The S strip and softmax_row make P (the bf16 products fuse them).
bool fused_probabilities(const Task& /*t*/, const QueryBlocks& /*q*/, int /*blk*/, int /*k0*/, int /*block_count*/,
                         int /*tile*/, float /*factor*/) {
    return false;
}

template <int kRows, bool kFresh>
void values_strip(const Task& t, int r0, int k0, int block_count) {
    Scratch& s = t.s;
    const int dvp = t.layout.dvp;
    for (int c0 = 0; c0 < dvp; c0 += kNRpv) {
        s.prefetch.step();
        micro_pv<kRows, kFresh>(s.o_acc + static_cast<std::size_t>(r0) * dvp + c0, dvp, s.alpha + r0, s.s_tile,
                                t.layout.bk, s.v_rows + k0 * s.v_row_stride + c0, s.v_row_stride, block_count);
    }
}

// O rows [r0, r0 + MR) = O * alpha + P V over keys [k0, k0 + block_count), P the row block's
// strip in s_tile (zero past each row's visible keys); rows past `block_rows` are left alone.
// At k0 = 0 O is not read but started from zero: every row's visible keys start at key 0, so a
// row block's first P V is always the first key tile's, and o_acc needs no clearing.
void accumulate_values(const Task& t, int r0, int block_rows, int k0, int block_count) {
    if (block_rows <= kTailRows) {
        if (k0 == 0) values_strip<kTailRows, true>(t, r0, k0, block_count);
        else values_strip<kTailRows, false>(t, r0, k0, block_count);
    } else {
        if (k0 == 0) values_strip<kMR, true>(t, r0, k0, block_count);
        else values_strip<kMR, false>(t, r0, k0, block_count);
    }
}

}  // namespace
}  // namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE
