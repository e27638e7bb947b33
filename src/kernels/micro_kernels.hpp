// The register-blocked micro-kernels: an MR x NR tile of A B (S = Q K^T in the kernel, Y = X W
// in the projections) and an MR x NRpv tile of O * alpha + P V, every accumulator in a register.
// MR and the vectors per tile row come from the including backend (ATTNBATCH_MR, ATTNBATCH_NV,
// optionally ATTNBATCH_NV_PV), chosen so that the accumulators fill its vector registers.
#pragma once

#include <cstddef>

#include "simd.hpp"

namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE {
namespace {

constexpr int kMR = ATTNBATCH_MR;            // query rows per micro-tile
constexpr int kNV = ATTNBATCH_NV;            // vectors per micro-tile row
constexpr int kNR = kNV * kLanes;            // columns per micro-tile
#if !defined(ATTNBATCH_NV_PV)
#define ATTNBATCH_NV_PV ATTNBATCH_NV
#endif
constexpr int kNVpv = ATTNBATCH_NV_PV;       // vectors per row of the P.V micro-tile
constexpr int kNRpv = kNVpv * kLanes;        // value columns per P.V micro-tile

// Rows of the smaller micro-tile for a row block whose last rows lie past the valid queries
// (e.g. the last 5 of 517 rows in blocks of 8): those rows are left out rather than computed
// and dropped.
constexpr int kTailRows = kMR - kMR / 3;

// c[MR x NR] = a[MR x dk] . b[dk x NR]   (a: query rows, lda apart; b: packed key panel)
// The MR broadcasts per step read MR rows side by side, which L1 serves as well as a
// transposed copy would, and the queries need no transpose. With kRowMax, also
// row_max[m] = max(row_max[m], c[m][:]) lane-wise while the tile is still in registers.
// kRows < MR or kCols < NV compute only the first kRows rows or kCols vectors of the tile
// (each element by the same operations in the same order as the whole tile). With kMasked,
// row m's columns from visible[m] on (any int; <= 0: the whole row) are stored, and enter
// row_max, as -inf: a mask's edge (causal diagonal, end of the keys) handled in registers, so
// that the softmax of every row reads whole vectors and needs no scan or mask of its own.
template <bool kRowMax = false, int kRows = kMR, int kCols = kNV, bool kMasked = false>
inline void micro_qk(const float* __restrict a, std::ptrdiff_t lda, const float* __restrict b, int dk,
                     float* __restrict c, int ldc, Vec* __restrict row_max = nullptr,
                     const int* __restrict visible = nullptr) {
    Vec acc[kRows][kCols];
#pragma GCC unroll 16
    for (int m = 0; m < kRows; ++m)
#pragma GCC unroll 8
        for (int n = 0; n < kCols; ++n) acc[m][n] = Vec{};
    for (int kk = 0; kk < dk; ++kk) {
        Vec bv[kCols];
#pragma GCC unroll 8
        for (int n = 0; n < kCols; ++n) bv[n] = load(b + kk * kNR + n * kLanes);
#pragma GCC unroll 16
        for (int m = 0; m < kRows; ++m) {
            const Vec am = splat(a[m * lda + kk]);
#pragma GCC unroll 8
            for (int n = 0; n < kCols; ++n) acc[m][n] += am * bv[n];
        }
    }
#pragma GCC unroll 16
    for (int m = 0; m < kRows; ++m) {
        if constexpr (kMasked) {
#pragma GCC unroll 8
            for (int n = 0; n < kCols; ++n) acc[m][n] = first_lanes_or(acc[m][n], visible[m] - n * kLanes, splat(kNegInf));
        }
#pragma GCC unroll 8
        for (int n = 0; n < kCols; ++n) store(c + m * ldc + n * kLanes, acc[m][n]);
        if constexpr (kRowMax) {
            Vec mx = row_max[m];
#pragma GCC unroll 8
            for (int n = 0; n < kCols; ++n) mx = acc[m][n] > mx ? acc[m][n] : mx;
            row_max[m] = mx;
        }
    }
}

// o[MR x NRpv] = o * alpha[m] + p[MR x count] . v[count x NRpv]   (the first kRows rows), or
// with kFresh o = p . v, o not read (it may hold anything): the first key tile.
template <int kRows = kMR, bool kFresh = false>
inline void micro_pv(float* __restrict o, int ldo, const float* __restrict alpha,
                     const float* __restrict p, int ldp, const float* __restrict v, std::ptrdiff_t ldv,
                     int count) {
    Vec acc[kRows][kNVpv];
#pragma GCC unroll 16
    for (int m = 0; m < kRows; ++m) {
        const Vec am = splat(alpha[m]);
#pragma GCC unroll 8
        for (int n = 0; n < kNVpv; ++n) acc[m][n] = kFresh ? Vec{} : load(o + m * ldo + n * kLanes) * am;
    }
    for (int j = 0; j < count; ++j) {
        Vec bv[kNVpv];
#pragma GCC unroll 8
        for (int n = 0; n < kNVpv; ++n) bv[n] = load(v + j * ldv + n * kLanes);
#pragma GCC unroll 16
        for (int m = 0; m < kRows; ++m) {
            const Vec pm = splat(p[m * ldp + j]);
#pragma GCC unroll 8
            for (int n = 0; n < kNVpv; ++n) acc[m][n] += pm * bv[n];
        }
    }
#pragma GCC unroll 16
    for (int m = 0; m < kRows; ++m)
#pragma GCC unroll 8
        for (int n = 0; n < kNVpv; ++n) store(o + m * ldo + n * kLanes, acc[m][n]);
}

}  // namespace
}  // namespace attnbatch::kernels::ATTNBATCH_ISA_NAMESPACE
