// Scaled dot-product attention kernels: softmax(Q K^T * scale) V per (sequence, head).
//
// The kernels see only AttentionParams: pointers, explicit element strides, sizes, scale,
// masks and the optional side outputs. They never allocate: the caller asks
// attention_workspace_bytes() and hands the buffer in. They include neither MPI nor HDF5.
//
// Masking (see SPEC.md): for sequence b with n = lengths[b] valid tokens, key j is masked
// when j >= n, or j > i with causal. Query rows i >= n, and any row whose keys are all
// masked, are written as exact zeros in `out` and `weights` and -inf in `lse`.
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
    const float* k = nullptr;  // (B, H, Lk, d_k)
    TensorStrides k_strides;
    const float* v = nullptr;  // (B, H, Lk, d_v)
    TensorStrides v_strides;
    float* out = nullptr;      // (B, H, Lq, d_v)
    TensorStrides out_strides;

    int batch = 0;
    int heads = 0;
    int len_q = 0;
    int len_k = 0;
    int dim_k = 0;
    int dim_v = 0;

    float scale = 0.0f;   // usually 1/sqrt(d_k)
    bool causal = false;  // key j > query i is masked

    const std::int32_t* lengths = nullptr;  // (B) valid tokens, 0 <= n <= min(Lq, Lk); null: all

    float* lse = nullptr;  // (B, H, Lq) contiguous, natural log; optional

    void* weights = nullptr;  // (B, H, Lq, Lk) for all, (B, 1, Lq, Lk) for mean; contiguous
    WeightsMode weights_mode = WeightsMode::none;
    WeightsType weights_type = WeightsType::f32;
};

enum class KernelKind { blocked, reference };

struct KernelOptions {
    KernelKind kind = KernelKind::blocked;
    Isa isa = Isa::best;  // instruction set of the blocked kernel (isa.hpp)
    int threads = 0;  // 0: omp_get_max_threads()
    int block_q = 0;  // 0: automatic
    int block_k = 0;  // 0: automatic
};

// Empty when the parameters are usable, else a one-line description of the first problem.
std::string check_attention_params(const AttentionParams& params);

// Bytes of scratch attention_forward needs for these parameters and options.
std::size_t attention_workspace_bytes(const AttentionParams& params, const KernelOptions& options);

// Throws std::invalid_argument when check_attention_params fails, when the workspace is
// too small, or when this CPU does not run the requested instruction set.
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

}  // namespace attnbatch::kernels
