// AMX tile instructions in plain C++, following the Intel SDM's pseudocode (LDTILECFG,
// TILELOADD, TILESTORED, TILEZERO, TDPBF16PS): a per-thread file of eight tiles of up to
// 16 rows x 64 bytes. Only for tests (tests/kernels/amx_emulation_test.cpp compiles the bf16
// products with ATTNBATCH_AMX_EMULATION), so that the tile path's layouts, strides and loops
// are checked on CPUs without AMX; the instructions themselves are not. TDPBF16PS adds the
// two products of a pair one after the other, each exact (bf16 x bf16 fits a float) and
// rounded once, even element first; denormal flushing is not modelled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace attnbatch::kernels::amx_emulation {

struct TileFile {
    unsigned char data[8][16][64];
    int rows[8];
    int bytes_per_row[8];
};

inline TileFile& tiles() {
    thread_local TileFile file{};
    return file;
}

inline float bf16_value(std::uint16_t bits) {
    const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &wide, sizeof value);
    return value;
}

// The 64-byte configuration LDTILECFG reads: palette, start row, reserved, bytes per row of
// each tile (16-bit) at byte 16, rows of each tile at byte 48.
inline void load_config(const void* config) {
    const unsigned char* bytes = static_cast<const unsigned char*>(config);
    for (int t = 0; t < 8; ++t) {
        std::uint16_t colsb;
        std::memcpy(&colsb, bytes + 16 + 2 * t, sizeof colsb);
        tiles().bytes_per_row[t] = colsb;
        tiles().rows[t] = bytes[48 + t];
    }
}

inline void zero(int t) { std::memset(tiles().data[t], 0, sizeof tiles().data[t]); }

inline void load(int t, const void* base, std::ptrdiff_t stride) {
    for (int r = 0; r < tiles().rows[t]; ++r) {
        std::memcpy(tiles().data[t][r], static_cast<const unsigned char*>(base) + r * stride,
                    static_cast<std::size_t>(tiles().bytes_per_row[t]));
    }
}

inline void store(int t, void* base, std::ptrdiff_t stride) {
    for (int r = 0; r < tiles().rows[t]; ++r) {
        std::memcpy(static_cast<unsigned char*>(base) + r * stride, tiles().data[t][r],
                    static_cast<std::size_t>(tiles().bytes_per_row[t]));
    }
}

inline void dot_bf16(int c, int a, int b) {
    TileFile& f = tiles();
    for (int m = 0; m < f.rows[c]; ++m) {
        float acc[16];
        std::memcpy(acc, f.data[c][m], sizeof acc);
        for (int k = 0; k < f.bytes_per_row[a] / 4; ++k) {
            std::uint16_t a_pair[2];
            std::memcpy(a_pair, f.data[a][m] + 4 * k, sizeof a_pair);
            for (int n = 0; n < f.bytes_per_row[c] / 4; ++n) {
                std::uint16_t b_pair[2];
                std::memcpy(b_pair, f.data[b][k] + 4 * n, sizeof b_pair);
                acc[n] = __builtin_fmaf(bf16_value(a_pair[0]), bf16_value(b_pair[0]), acc[n]);
                acc[n] = __builtin_fmaf(bf16_value(a_pair[1]), bf16_value(b_pair[1]), acc[n]);
            }
        }
        std::memcpy(f.data[c][m], acc, sizeof acc);
    }
}

}  // namespace attnbatch::kernels::amx_emulation
