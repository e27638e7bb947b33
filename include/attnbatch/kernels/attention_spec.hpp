// The settings of a run that change what attention computes, so every result bit of /output,
// /attention and /lse. Defined once here, they travel typed from `run`'s options (cli) through
// the job (distributed) to the kernels' parameters; one codec (io/output/attention_fields.hpp)
// records them in the output, reads them back for `verify`, `weights` and --resume, and names
// them in the job's identity and in --report.
//
// Not here, on purpose: the heads H and G (the input's and the weights file's shapes decide
// them, with --heads and --kv-heads as checks; they are recorded with the input's shape), which
// attention maps are stored and in what type (--save-weights, --weights-dtype: the output's
// layout, io::OutputLayout, not the arithmetic), and how the kernel runs (--isa, --threads,
// --block-q/k: KernelOptions).
#pragma once

#include <cmath>
#include <cstdint>

#include "attnbatch/kernels/attention.hpp"
#include "attnbatch/kernels/isa.hpp"

namespace attnbatch::kernels {

struct AttentionSpec {
    bool causal = false;       // key j > query position i is masked
    double scale = 0.0;        // the logits' factor; 0: 1/sqrt(d_k) (kernel_scale)
    double rope_theta = 0.0;   // rotary position embeddings on Q and K with this base (rope.hpp); 0: none
    Precision precision = Precision::fp32;  // the matrix products' arithmetic (KernelOptions::precision)

    bool rotary() const { return rope_theta > 0; }
    // The factor the kernels multiply the logits by (AttentionParams::scale).
    float kernel_scale(std::int64_t d_k) const {
        return scale > 0 ? static_cast<float>(scale) : static_cast<float>(1.0 / std::sqrt(static_cast<double>(d_k)));
    }
    // What the kernels take of it, in `params` whose dim_k is set. (The rotary embeddings are
    // applied to Q and K before the kernel, by whoever stages them.)
    void apply_to(AttentionParams& params) const {
        params.scale = kernel_scale(params.dim_k);
        params.causal = causal;
    }
    // The same spec with `scale` as the kernels use it, as recorded in the output.
    AttentionSpec resolved(std::int64_t d_k) const {
        AttentionSpec spec = *this;
        spec.scale = kernel_scale(d_k);
        return spec;
    }
};

}  // namespace attnbatch::kernels
