// Scaled dot-product attention kernels: softmax(Q K^T * scale) V per (sequence, head).
//
// The kernels see only AttentionParams: pointers, explicit element strides, sizes, scale,
// masks and the optional side outputs. They never allocate: the caller asks
// attention_workspace_bytes() and hands the buffer in. They include neither MPI nor HDF5.
//
// Masking (see docs/formats.md): for sequence b with n = lengths[b] valid tokens, the query row at
// position i (i = q_offset + its row index) sees key j unless j >= n, or j > i with causal.
// Rows at positions i >= n, and any row whose keys are all masked, are written as exact zeros
// in `out` and `weights` and -inf in `lse`.
//
// A row's arithmetic depends only on its position, its sequence's keys and values and the
// parameters, never on which other rows share the call: computing rows [q0, q1) of a sequence
// (q_offset = q0, len_q = q1 - q0) gives those rows of a whole-sequence call bit for bit.
// That is what lets a long sequence be split across ranks.
//
// Grouped-query attention: with kv_heads = G < H, K and V hold G heads and query head h reads
// K/V head h / (H / G) (G = 1 is multi-query attention).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "attnbatch/kernels/isa.hpp"

namespace attnbatch::kernels {

// Element strides; the last axis (features) is always contiguous.
struct TensorStrides {
    std::ptrdiff_t seq = 0;
    std::ptrdiff_t head = 0;
    std::ptrdiff_t row = 0;
};

enum class WeightsMode { none, all, mean_over_heads };
enum class WeightsType { f32, f16 };  // f16: IEEE binary16 bit patterns (uint16_t)

struct AttentionParams {
    const float* q = nullptr;  // (B, H, Lq, d_k)
    TensorStrides q_strides;
    const float* k = nullptr;  // (B, G, Lk, d_k), G = kv_heads
    TensorStrides k_strides;
    const float* v = nullptr;  // (B, G, Lk, d_v)
    TensorStrides v_strides;
    float* out = nullptr;      // (B, H, Lq, d_v)
    TensorStrides out_strides;

    int batch = 0;
    int heads = 0;     // H
    int kv_heads = 0;  // G, dividing H; 0: G = H
    int len_q = 0;     // rows of q computed, at positions [q_offset, q_offset + len_q)
    int q_offset = 0;  // position of q's first row in its sequence (masks and causality)
    int len_k = 0;
    int dim_k = 0;
    int dim_v = 0;

    float scale = 0.0f;   // usually 1/sqrt(d_k)
    bool causal = false;  // key j > query position i is masked

    // (B) valid tokens of each sequence, 0 <= n <= Lk (n may exceed Lk with causal masking
    // when q_offset + Lq <= Lk: no row sees past the keys given); null: every row and key valid.
    const std::int32_t* lengths = nullptr;

    float* lse = nullptr;  // (B, H, Lq) contiguous, natural log; optional

    void* weights = nullptr;  // (B, H, Lq, Lk) for all, (B, 1, Lq, Lk) for mean; contiguous
    WeightsMode weights_mode = WeightsMode::none;
    WeightsType weights_type = WeightsType::f32;
};

// The K/V head query head h reads, and the number of K/V heads.
inline int kv_head_count(const AttentionParams& p) { return p.kv_heads > 0 ? p.kv_heads : p.heads; }
inline int kv_head_of(const AttentionParams& p, int h) { return h / (p.heads / kv_head_count(p)); }

enum class KernelKind { blocked, reference };

struct KernelOptions {
    KernelKind kind = KernelKind::blocked;
    Isa isa = Isa::best;  // instruction set of the blocked kernel (isa.hpp)
    // The blocked kernel's arithmetic (isa.hpp); an explicit isa must compute in it. The
    // reference kernel is fp64 whatever this says.
    Precision precision = Precision::fp32;
    // bf16 on AMX tiles needs the operating system's consent first (Linux: arch_prctl
    // ARCH_REQ_XCOMP_PERM for XTILEDATA, or the first tile instruction raises SIGILL). The
    // kernels include no system headers and cannot ask: the caller does, and says here that it
    // was granted. Without it, or without AMX, bf16 runs on AVX512-BF16 dot products.
    bool amx_permitted = false;
    int threads = 0;  // 0: omp_get_max_threads()
    int block_q = 0;  // 0: automatic
    int block_k = 0;  // 0: automatic
};

// Empty when the parameters are usable, else a one-line description of the first problem.
std::string check_attention_params(const AttentionParams& params);

// Bytes of scratch attention_forward needs for these parameters and options.
std::size_t attention_workspace_bytes(const AttentionParams& params, const KernelOptions& options);

// The kernel version whose bits bf16 runs have (the version log of
// src/kernels/blocked_attention.hpp): raised by every change that gives bf16 outputs other
// bits. Part of a bf16 run's resume identity, so that no build finishes a bf16 output another
// build began with other rounding.
inline constexpr int kBf16BitsVersion = 15;

// What the matrix products of these options run on, for reports and the resume identity:
// "amx-bf16" or "avx512-bf16" (bf16), the isa's name (fp32), "fp64-reference". Throws
// std::invalid_argument as attention_forward does for an isa or precision this CPU lacks.
std::string matrix_unit(const KernelOptions& options);
// Rows per register tile of the attention these options run, where the backend picks them by
// CPU (the avx512 fp32 kernel: avx512_row_block, isa.hpp); 0 where the build fixes them.
// Throws as matrix_unit does.
int row_block(const KernelOptions& options);

// Throws std::invalid_argument when check_attention_params fails, when the workspace is
// too small, or when this CPU does not run the requested instruction set and precision.
void attention_forward(const AttentionParams& params, const KernelOptions& options,
                       void* workspace, std::size_t workspace_bytes);

// Double-precision outputs of the plain three-pass reference (any pointer may be null).
struct ReferenceOutputs {
    double* out = nullptr;      // (B, H, Lq, d_v) contiguous
    double* lse = nullptr;      // (B, H, Lq)
    double* weights = nullptr;  // (B, H, Lq, Lk), or (B, 1, Lq, Lk) when mean_over_heads
    bool weights_mean_over_heads = false;
};

// Reads only the input fields of `params` (q, k, v, sizes, scale, causal, lengths).
// Computes every logit in double, three passes per row, no scratch memory.
void reference_attention_f64(const AttentionParams& params, const ReferenceOutputs& outputs);

// The bf16 kernel's error floor: reference_attention_f64's arithmetic (all in double) on Q, K and
// V rounded to bfloat16 and each row's P = exp(logit - row max) rounded to bfloat16 where it
// multiplies V (the row sum, lse and weights take P unrounded, as the kernel's do): the error
// that the roundings of the products' operands alone give. The bf16 kernel is held to its NMSE
// against reference_attention_f64 (tests/kernels, `bench --check`).
void bf16_operands_attention_f64(const AttentionParams& params, const ReferenceOutputs& outputs);

// A plain bf16 implementation, the yardstick of the bf16 kernel (`verify` allows a bf16 run
// twice its error against reference_attention_f64: the flash-attention rule): Q, K, V rounded to
// bf16, logits and P V accumulated in float, the softmax in float, the normalised P rounded to
// bf16 before P V; lse and weights in float. Reads and writes as reference_attention_f64.
void naive_attention_bf16(const AttentionParams& params, const ReferenceOutputs& outputs);

}  // namespace attnbatch::kernels
