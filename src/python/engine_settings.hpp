// The one place where the Python module's arguments become the engine's settings: the shapes
// of the caller's arrays and the keywords of attnbatch.attention() in, the io::InputSpec,
// distributed::AttentionSettings and io::OutputLayout that `run` would build for the same data
// and options out. Options shared with the command line (--precision, the backend it picks,
// AMX) go through the command line's own parsers, so that they mean and dispatch the same.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnbatch/distributed/step_computer.hpp"
#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/models/weights_reader.hpp"
#include "attnbatch/io/output/output_layout.hpp"

namespace attnbatch::python {

// Projection matrices handed as arrays (row-vector convention, as in a weights file), already
// float32 and C-contiguous; a matrix's shape is {rows, columns}.
struct WeightArrays {
    io::ProjectionWeights values;
    std::vector<std::int64_t> w_q, w_k, w_v, w_o;  // shapes; w_o empty when absent
};

// What attention() was given, in C++ terms.
struct AttentionRequest {
    // Padded sequences [N, L, width]: x (embeddings) or q, k, v.
    bool qkv = false;
    std::int64_t n = 0, len = 0;
    std::int64_t x_width = 0, q_width = 0, k_width = 0, v_width = 0;
    int heads = 1;
    int kv_heads = 0;  // 0: not given
    bool causal = false;
    double scale = 0;  // 0: 1/sqrt(d_k)
    double rope_theta = 0;
    std::string precision = "fp32";
    int threads = 0;  // 0: OpenMP's default
    std::string maps = "none";  // none|all|mean: --save-weights
    std::string maps_dtype = "f32";  // f32|f16: --weights-dtype
    std::optional<WeightArrays> weight_arrays;  // projections given as arrays
    std::string weights_path;                   // projections given as a weights file
};

struct EngineSettings {
    io::InputSpec spec;
    std::optional<io::ProjectionWeights> weights;
    distributed::AttentionSettings attention;
    io::OutputLayout layout;
};

// Error (exit 2 or 3, the command line's codes and wording where it has them) when the
// request cannot work.
EngineSettings engine_settings(const AttentionRequest& request);

}  // namespace attnbatch::python
