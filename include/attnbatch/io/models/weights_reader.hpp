// Loading the projection weights of a file describe_weights() accepted into float32 memory
// (float64 matrices are converted by HDF5 during the read).
#pragma once

#include "attnbatch/io/h5/file_access.hpp"
#include "attnbatch/io/models/weights_spec.hpp"

#include <vector>

namespace attnbatch::io {

struct ProjectionWeights {
    std::vector<float> w_q;  // (d, H*d_k)
    std::vector<float> w_k;  // (d, G*d_k)
    std::vector<float> w_v;  // (d, G*d_v)
    std::vector<float> w_o;  // (H*d_v, d_out); empty without /w_o
    std::vector<float> b_q, b_k, b_v, b_o;  // (H*d_k), (G*d_k), (G*d_v), (d_out); empty when absent
};

// Error (exit 4) when a matrix cannot be read.
ProjectionWeights read_weights(const WeightsSpec& spec, const FileAccess& access = {});

}  // namespace attnbatch::io
