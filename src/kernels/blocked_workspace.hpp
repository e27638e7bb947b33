// The blocked kernel's per-thread scratch: tile sizes rounded to the micro-tile, the buffer
// sizes they imply (workspace_bytes) and the carving of the caller's workspace into them.
#pragma once

#include <cstddef>

#include "attnbatch/kernels/attention.hpp"
#include "micro_kernels.hpp"
#include "prefetch.hpp"

namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE {
namespace {

constexpr std::size_t kAlign = 64;

// Bytes of n floats, rounded up so that the next buffer starts on a cache line.
std::size_t floats(std::size_t n) { return round_up(n * sizeof(float), kAlign); }

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
    // By the mode alone, not the pointer: callers size the workspace before their weights
    // buffer exists, and check_attention_params refuses a null one where it is written.
    if (p.weights_mode != WeightsMode::none) {
        l.w_strip = floats(bq * l.lkp);
        l.w_tile_max = floats(bq * l.key_tiles);
        if (p.weights_mode == WeightsMode::mean_over_heads) l.w_mean = floats(bq * l.lkp);
    }
    l.per_thread = l.q_pack + l.k_pack + l.v_pack + l.s_tile + l.o_acc + l.row_state + l.w_strip +
                   l.w_tile_max + l.w_mean;
    return l;
}

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

}  // namespace
}  // namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE
