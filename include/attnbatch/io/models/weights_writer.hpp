// Writing a projection-weights file, the inverse of describe_weights() and read_weights(),
// for every maker of one (`generate --weights-out`, `import-weights`):
//   /w_q [d, H*d_k], /w_k [d, G*d_k], /w_v [d, G*d_v], optional /w_o [H*d_v, d_out], optional
//   biases /b_q [H*d_k], /b_k [G*d_k], /b_v [G*d_v], /b_o [d_out] (only with /w_o),
//   in that order, chunked about 1 MiB along rows, axes labelled (G where the file states
//   its K/V heads, else H), each with the attribute source_tensor when it was imported;
//   then the root attributes format, generator, seed (generate), heads, dtype, kv_heads
//   (when stated), head_dim, value_dim, out_dim (with /w_o), and what an imported layer came
//   from. The same content always makes the same bytes. The caller stages the file
//   (output/staged_file.hpp).
#pragma once

#include "attnbatch/io/h5/computed_values.hpp"
#include "attnbatch/io/h5/type_info.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace attnbatch::io {

class File;  // h5/file.hpp

struct WeightsContent {
    DataType dtype = DataType::float32;  // float32 or float64
    std::int64_t d = 0, heads = 1, d_k = 0, d_v = 0;
    // G: /w_k and /w_v have G*d_k and G*d_v columns, and the file states it (axis labels G,
    // attribute kv_heads); 0: G = H, not stated.
    std::int64_t kv_heads = 0;
    std::int64_t d_out = 0;          // columns of /w_o
    ValueSource w_q, w_k, w_v;       // index [row, column]
    ValueSource w_o;                 // empty: no /w_o (and no /b_o)
    ValueSource b_q, b_k, b_v, b_o;  // index [column]; empty: no such bias
    std::map<std::string, std::string> source_tensors;  // dataset -> what it was made from (import)
};

// How the file was made, recorded as root attributes.
struct WeightsRecord {
    std::string generator;              // "attnbatch generate 0.1.0", "attnbatch import-weights 0.1.0"
    std::optional<std::uint64_t> seed;  // generate's random seed
    // import-weights: the model layer the weights are.
    struct Import {
        std::string source;         // the model file's absolute path
        std::string source_format;  // "safetensors"
        std::string layer;          // the layer's prefix in the model ("" at the top)
        std::string naming;         // "nn.MultiheadAttention", "bert" or "llama"
        std::string tensors;        // the model tensors read, comma-separated
        std::string model_type;     // config.json's, "" when none
        double rope_theta = 0;      // config.json's, 0 when none
    };
    std::optional<Import> import;
};

// Uncompressed payload bytes, in double: the requested sizes may exceed 2^64.
double weights_bytes(const WeightsContent& content);

// H5Error (exit 4) when HDF5 cannot write.
std::vector<WrittenDataset> write_weights(const File& file, const WeightsContent& content, const WeightsRecord& record,
                                          std::size_t slab_bytes = default_slab_bytes);

}  // namespace attnbatch::io
