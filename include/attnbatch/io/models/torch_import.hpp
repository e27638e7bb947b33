// One attention layer of a PyTorch or Hugging Face model (a safetensors file) made into the
// projection weights file `run --weights` reads (docs/commands.md "import-weights").
//
// Naming schemes, each relative to the layer's prefix P ("" at the top level):
//   nn.MultiheadAttention  P.in_proj_weight [3E, E] (or P.q_proj_weight, P.k_proj_weight,
//                          P.v_proj_weight [E, E]), P.in_proj_bias [3E], P.out_proj.weight/.bias
//   bert                   P.self.query/key/value.weight/.bias, P.output.dense.weight/.bias
//                          (BERT, RoBERTa, ...); also P.query... when P is the "self" module
//   llama                  P.q_proj/k_proj/v_proj/o_proj.weight, biases optional (Llama,
//                          Mistral, Qwen, ...: fewer K/V heads, rotary embeddings)
// PyTorch stores a Linear's weight [out, in]; the weights file is row-vector [in, out], so
// every matrix is transposed; float16, bfloat16 and float64 tensors become float32.
//
// Head counts: --heads/--kv-heads, else a config.json beside the model file
// (num_attention_heads, num_key_value_heads; also rope_theta and model_type, recorded), else
// for the K/V heads what the shapes say. Every failure is one line: Error exit 2 for options
// (a --prefix naming no layer, several layers and no --prefix, a head count the shapes or the
// config contradict), exit 3 for the model (no attention layer, a missing tensor, a shape that
// fits no head count, a damaged file), exit 4 for I/O.
#pragma once

#include "attnbatch/io/models/safetensors.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attnbatch::io {

struct ImportRequest {
    std::string input;   // MODEL.safetensors
    std::string output;  // W.h5
    std::string prefix;  // the layer; empty: the only one the model has
    int heads = 0, kv_heads = 0;  // 0: not given
    bool force = false;           // replace an existing output
    std::string generator;        // recorded: "attnbatch import-weights VERSION"
};

struct AttentionLayer {
    std::string prefix;  // "" for a model that is one layer
    std::string naming;  // "nn.MultiheadAttention", "bert" or "llama"
};

// Every attention layer the tensor names show, sorted by prefix.
std::vector<AttentionLayer> find_attention_layers(const SafetensorsFile& model);

struct ImportedWeights {
    AttentionLayer layer;
    std::string config_path;  // the config.json read, "" when none
    std::string model_type;   // from config.json
    std::int64_t d = 0, heads = 0, kv_heads = 0, d_k = 0, d_v = 0, d_out = 0;  // d_out 0: no w_o
    double rope_theta = 0;    // from config.json, 0 when it says none
    std::vector<std::pair<std::string, std::string>> datasets;  // (dataset, what it was made from)
    std::vector<std::string> notes;  // worth telling the user (conversions, rope scaling not applied)
};

ImportedWeights import_weights(const ImportRequest& request);

}  // namespace attnbatch::io
