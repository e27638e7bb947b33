// Prefetch heuristics of the blocked kernel: which task a thread probably runs next, and a
// stream of L2 prefetches of that task's rows spread over the current task's work. Only hints:
// they change how fast the kernel runs, never what it computes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attnbatch/kernels/attention.hpp"
#include "simd.hpp"

namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE {
namespace {

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

// Aims `pf` at the rows `next` reads first: its query tile, and its share of the keys and values
// of (kv_b, kv_h), which has `kv_keys` valid keys, unless that is the head of this task (b, h).
// The lines are spread over this task's `calls` micro-kernel calls (about half of them with a
// causal mask) so that the prefetches finish about three quarters into the task.
inline void aim_prefetch(Prefetch& pf, const AttentionParams& p, const NextTask& next, long kv_keys, int b, int h,
                         int block_q, long calls) {
    pf.clear();
    if (next.b >= 0) {
        const float* q = p.q + next.b * p.q_strides.seq + next.h * p.q_strides.head + next.i0 * p.q_strides.row;
        pf.add(q, p.q_strides.row, imin(block_q, p.len_q - next.i0), p.dim_k);
    }
    if (next.kv_b >= 0 && !(next.kv_b == b && next.kv_h == h)) {
        const int k_lo = static_cast<int>(kv_keys * next.kv_row0 / p.len_q);
        const int k_hi = static_cast<int>(kv_keys * next.kv_row1 / p.len_q);
        pf.add(p.k + next.kv_b * p.k_strides.seq + next.kv_h * p.k_strides.head + k_lo * p.k_strides.row,
               p.k_strides.row, k_hi - k_lo, p.dim_k);
        pf.add(p.v + next.kv_b * p.v_strides.seq + next.kv_h * p.v_strides.head + k_lo * p.v_strides.row,
               p.v_strides.row, k_hi - k_lo, p.dim_v);
    }
    if (p.causal) calls /= 2;
    calls = calls * 3 / 4 > 0 ? calls * 3 / 4 : 1;
    pf.lines_per_step = static_cast<int>((pf.total_lines() + calls - 1) / calls);
}

// Dynamic scheduling hands out chunks of `chunk` tasks in order, so a thread's next task is most
// likely the next one in its chunk, else the start of the chunk `threads` further on. The keys
// and values of that later chunk's head are prefetched in shares across the current chunk's
// tasks, when one head's keys and values take at most a quarter of a 2 MiB L2.
NextTask guess_next_task(const AttentionParams& p, int block_q, long id, long q_tiles, long tasks, int chunk,
                         int threads, bool mean) {
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
        n.i0 = static_cast<int>(succ % q_tiles) * block_q;
    }
    const std::size_t kv_bytes = static_cast<std::size_t>(p.len_k) * (p.dim_k + p.dim_v) * sizeof(float);
    if (far < tasks && kv_bytes <= (std::size_t{512} << 10)) {
        head_of(far, n.kv_b, n.kv_h);
        const int i0 = static_cast<int>(id % q_tiles) * block_q;
        n.kv_row0 = i0;
        n.kv_row1 = imin(i0 + block_q, p.len_q);
    }
    return n;
}

}  // namespace
}  // namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE
