// Loading validated input into float32 memory: blocks of whole sequences, and the weights.
// float64 data is converted by HDF5 during the read (describe_input has already rejected
// values beyond float32's range).
#pragma once

#include "attnbatch/io/h5_dataset.hpp"
#include "attnbatch/io/input.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace attnbatch::io {

// Sequences [first, first + count) as stored; the buffers are reused between reads.
struct InputBlock {
    std::int64_t first = 0;
    std::int64_t count = 0;
    std::vector<float> x;        // (count, L, d)                      embeddings mode
    std::vector<float> q, k, v;  // (count, L, H*d) packed or (count, H, L, d) split
    std::vector<std::int32_t> lengths;  // (count); L when the input has no lengths
};

class InputReader {
public:
    explicit InputReader(const InputSpec& spec, const FileAccess& access = {});

    // Reads sequences [first, last); Error (exit 4) when HDF5 fails to read.
    void read(std::int64_t first, std::int64_t last, InputBlock& block);
    // Every sequence's valid-token count (L for all without a lengths dataset): what plans need.
    std::vector<std::int32_t> read_all_lengths();

    const InputSpec& spec() const noexcept { return spec_; }

private:
    InputSpec spec_;
    File file_;
    std::vector<Dataset> data_;  // x, or q, k, v
    std::optional<Dataset> lengths_;
};

struct ProjectionWeights {
    std::vector<float> w_q;  // (d, H*d_k)
    std::vector<float> w_k;  // (d, H*d_k)
    std::vector<float> w_v;  // (d, H*d_v)
    std::vector<float> w_o;  // (H*d_v, d_out); empty without /w_o
    std::vector<float> b_q, b_k, b_v, b_o;  // (H*d_k), (H*d_k), (H*d_v), (d_out); empty when absent
};

ProjectionWeights read_weights(const WeightsSpec& spec, const FileAccess& access = {});

}  // namespace attnbatch::io
