// Prefetch heuristics of the blocked kernel: which task a thread probably runs next, and a
// stream of L2 prefetches of that task's rows spread over the current task's work (aimed by
// prefetch_next_task in blocked_attention.hpp). Only hints: they change how fast the kernel
// runs, never what it computes.
//
// Measured on this project's AMD Zen 5 machine (a virtual machine): a software prefetch of a
// line whose page has no cached translation is dropped, so a stream of prefetches over fresh
// pages fetched little until each page had been touched by a load. touch_pages does that for
// every page of the input rows at once, when the stream is aimed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attnbatch/kernels/attention.hpp"
#include "simd.hpp"

namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE {
namespace {

// Software prefetch (into L2) of rows the thread's next task will read, or write (its output
// rows where they are not streamed past the caches, fetched for ownership, so that the stores
// at its end do not each wait for a read), a
// few rows before each micro-kernel call of the current task, so that the next task's packing
// and first blocks do not wait on memory. Only a hint: a wrong guess of the next task costs
// bandwidth, not results.
struct Prefetch {
    struct Stream {
        const char* base;
        std::ptrdiff_t stride;  // bytes between rows
        int rows;
        std::ptrdiff_t row_bytes;
        bool write;
    };
    static constexpr int kStreams = 4;
    Stream streams[kStreams];
    int streams_used = 0, stream = 0, row = 0, lines_per_step = 0;
    bool writing = false;        // the current row is to be written
    const char* line = nullptr;  // next line of the current row, and the row's end
    const char* end = nullptr;

    void clear() {
        streams_used = stream = row = lines_per_step = 0;
        line = end = nullptr;
    }
    void add(const float* base, std::ptrdiff_t stride, int rows, int cols, bool write = false) {
        if (rows <= 0 || streams_used == kStreams) return;
        Stream st{reinterpret_cast<const char*>(base), stride * static_cast<std::ptrdiff_t>(sizeof(float)), rows,
                  cols * static_cast<std::ptrdiff_t>(sizeof(float)), write};
        if (st.stride == st.row_bytes) {  // contiguous rows: one long row
            st.row_bytes *= rows;
            st.rows = 1;
        }
        streams[streams_used++] = st;
    }
    // One load from each 4 KiB page of the streams that are read, all issued together, so that
    // the pages' translations are cached before their lines are prefetched (see the top). Not
    // the rows to be written: the guess of the next task may be wrong, and another thread may be
    // writing them.
    void touch_pages() const {
        for (int i = 0; i < streams_used; ++i) {
            const Stream& st = streams[i];
            if (st.write) continue;
            std::uintptr_t last_page = 0;
            for (int r = 0; r < st.rows; ++r) {
                const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(st.base + r * st.stride);
                for (std::uintptr_t at = start; at < start + st.row_bytes; at = (at | 4095) + 1) {
                    if ((at >> 12) == last_page) continue;  // rows sharing a page: one load
                    last_page = at >> 12;
                    (void)*reinterpret_cast<const volatile unsigned char*>(at);
                }
            }
        }
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
                writing = st.write;
                const char* start = st.base + row * st.stride;
                line = reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(start) & ~std::uintptr_t{63});
                end = start + st.row_bytes;
                if (++row == st.rows) {
                    row = 0;
                    ++stream;
                }
            }
            if (writing) {
                __builtin_prefetch(line, 1, 2);
            } else {
                __builtin_prefetch(line, 0, 2);
            }
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

// The query tile of task `id`: tasks run a group's tiles in order, or from the last one when
// `last_first` (causal tiles cost more the later they sit: handing the dearest out first leaves
// the cheap ones to even out the threads at the end).
int tile_of(long id, long q_tiles, bool last_first) {
    const long index = id % q_tiles;
    return static_cast<int>(last_first ? q_tiles - 1 - index : index);
}

// Dynamic scheduling hands out chunks of `chunk` tasks in order, so a thread's next task is most
// likely the next one in its chunk, else the start of the chunk `threads` further on. The keys
// and values of that later chunk's head are prefetched in shares across the current chunk's
// tasks, when one head's keys and values take at most a quarter of a 2 MiB L2.
NextTask guess_next_task(const AttentionParams& p, int block_q, long id, long q_tiles, long tasks, int chunk,
                         int threads, bool mean, bool last_first) {
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
        n.i0 = tile_of(succ, q_tiles, last_first) * block_q;
    }
    const std::size_t kv_bytes = static_cast<std::size_t>(p.len_k) * (p.dim_k + p.dim_v) * sizeof(float);
    if (far < tasks && kv_bytes <= (std::size_t{512} << 10)) {
        head_of(far, n.kv_b, n.kv_h);
        const int i0 = tile_of(id, q_tiles, last_first) * block_q;
        n.kv_row0 = i0;
        n.kv_row1 = imin(i0 + block_q, p.len_q);
    }
    return n;
}

}  // namespace
}  // namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE
