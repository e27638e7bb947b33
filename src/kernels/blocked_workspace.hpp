// The blocked kernel's per-thread scratch: tile sizes rounded to the micro-tile, the buffer
// sizes they imply (workspace_bytes) and the carving of the caller's workspace into them.
// Included by a products header (fp32_products.hpp, bf16_products.hpp), which first says how
// it packs the operands of the two matrix products:
//   Operand               the element type of packed Q, K, V (and P)
//   kDepthAlign           d_k padded to a multiple of it in the packs
//   kPacksQueryTile       q_pack holds a whole query tile (else one row block of MR rows)
//   kPacksProbabilities   p_pack holds a row block's P as operands (MR x block_k)
#pragma once

#include <cstddef>

#include "attnbatch/kernels/attention.hpp"
#include "micro_kernels.hpp"
#include "prefetch.hpp"

namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE {
namespace {

constexpr std::size_t kAlign = 64;

// Bytes of n floats (or operands), rounded up so that the next buffer starts on a cache line.
std::size_t floats(std::size_t n) { return round_up(n * sizeof(float), kAlign); }
std::size_t operands(std::size_t n) { return round_up(n * sizeof(Operand), kAlign); }

// Per-thread scratch, carved from the caller's workspace in this order, each 64-byte aligned.
struct Layout {
    int bq = 0, bk = 0;         // tile sizes (multiples of MR and NR)
    int dkp = 0;                // d_k padded to kDepthAlign
    int dvp = 0;                // d_v padded to NRpv
    int lk_panels = 0;          // key panels of NR keys covering Lk
    int lkp = 0;                // Lk padded to a whole key tile
    int key_tiles = 0;
    std::size_t q_pack = 0, k_pack = 0, v_pack = 0, p_pack = 0, s_tile = 0, o_acc = 0, row_state = 0, row_sums = 0;
    std::size_t w_strip = 0, w_tile_max = 0, w_mean = 0;
    std::size_t per_thread = 0;
};

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
    l.dkp = static_cast<int>(round_up(static_cast<std::size_t>(p.dim_k), kDepthAlign));
    const std::size_t bq = l.bq, dk = l.dkp;
    // A query tile, or a partial last row block, zero-padded.
    l.q_pack = operands(static_cast<std::size_t>(kPacksQueryTile ? l.bq : kMR) * dk);
    l.k_pack = operands(static_cast<std::size_t>(l.lk_panels) * kNR * dk);
    l.v_pack = operands(static_cast<std::size_t>(lk_rounded) * l.dvp);
    l.p_pack = kPacksProbabilities ? operands(static_cast<std::size_t>(kMR) * l.bk) : 0;
    l.s_tile = floats(static_cast<std::size_t>(kMR) * l.bk);  // one row block's strip
    l.o_acc = floats(bq * l.dvp);
    l.row_state = 5 * floats(bq);  // m, l, l of the P V operand, alpha, valid keys
    l.row_sums = floats(static_cast<std::size_t>(2 * kMR) * kLanes);  // a row block's partial sums (fused_probabilities)
    // By the mode alone, not the pointer: callers size the workspace before their weights
    // buffer exists, and check_attention_params refuses a null one where it is written.
    if (p.weights_mode != WeightsMode::none) {
        l.w_strip = floats(bq * l.lkp);
        l.w_tile_max = floats(bq * l.key_tiles);
        if (p.weights_mode == WeightsMode::mean_over_heads) l.w_mean = floats(bq * l.lkp);
    }
    l.per_thread = l.q_pack + l.k_pack + l.v_pack + l.p_pack + l.s_tile + l.o_acc + l.row_state + l.row_sums + l.w_strip +
                   l.w_tile_max + l.w_mean;
    return l;
}

struct Scratch {
    Operand* q_pack;
    Operand* k_pack;
    Operand* v_pack;
    Operand* p_pack;  // null unless kPacksProbabilities
    float* s_tile;
    float* o_acc;
    float* m;
    float* l;
    float* l_operand;  // the row sum of P as P V reads it (rounded, for bf16): what O is divided by
    float* alpha;
    int* valid_keys;
    float* row_sums;
    float* w_strip;
    float* w_tile_max;
    float* w_mean;
    long packed_seq = -1, packed_head = -1;  // which (sequence, head) k_pack/v_pack hold
    bool matrix_tiles = false;               // the products run on AMX tiles (bf16_products.hpp)
    const float* v_rows = nullptr;           // where P V reads the values (fp32: v_pack, or V in place)
    std::ptrdiff_t v_row_stride = 0;
    Prefetch prefetch;
};

// One task's view of the call: the parameters, the layout and the thread's scratch.
struct Task {
    const AttentionParams& p;
    const Layout& layout;
    Scratch& s;
};

Scratch carve(const Layout& layout, char* base) {
    Scratch s{};
    auto take = [&base](std::size_t bytes) {
        char* here = base;
        base += bytes;
        return here;
    };
    s.q_pack = reinterpret_cast<Operand*>(take(layout.q_pack));
    s.k_pack = reinterpret_cast<Operand*>(take(layout.k_pack));
    s.v_pack = reinterpret_cast<Operand*>(take(layout.v_pack));
    s.p_pack = layout.p_pack ? reinterpret_cast<Operand*>(take(layout.p_pack)) : nullptr;
    s.s_tile = reinterpret_cast<float*>(take(layout.s_tile));
    s.o_acc = reinterpret_cast<float*>(take(layout.o_acc));
    const std::size_t state = layout.row_state / 5;
    s.m = reinterpret_cast<float*>(take(state));
    s.l = reinterpret_cast<float*>(take(state));
    s.l_operand = reinterpret_cast<float*>(take(state));
    s.alpha = reinterpret_cast<float*>(take(state));
    s.valid_keys = reinterpret_cast<int*>(take(state));
    s.row_sums = reinterpret_cast<float*>(take(layout.row_sums));
    s.w_strip = layout.w_strip ? reinterpret_cast<float*>(take(layout.w_strip)) : nullptr;
    s.w_tile_max = layout.w_tile_max ? reinterpret_cast<float*>(take(layout.w_tile_max)) : nullptr;
    s.w_mean = layout.w_mean ? reinterpret_cast<float*>(take(layout.w_mean)) : nullptr;
    return s;
}

}  // namespace
}  // namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE
