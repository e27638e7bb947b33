// Every dataset and attribute name of attnbatch's files, in one table: the input a run reads
// (written by `generate`), the projection weights file, the output a run writes (docs/formats.md
// "Output file") with its resume journal, and the attention maps of `weights`. Writers,
// readers and the checks of `inspect` all spell a name through here, so a reader can never
// look for a name its writer does not use.
#pragma once

namespace attnbatch::io {

// Dataset paths, absolute from the root group.
namespace dataset {

// Input (docs/formats.md `run`): the defaults of --dataset and --lengths, and the names `generate`
// gives Q, K and V (which `inspect` then recognises).
inline constexpr const char* embeddings = "/embeddings";  // float32/64 [N, L, d]
inline constexpr const char* lengths = "/lengths";        // integer [N] in an input; int32 [N] in an output
inline constexpr const char* query = "/query";            // [N, L, H*d_k] packed or [N, H, L, d_k] split
inline constexpr const char* key = "/key";                // like /query
inline constexpr const char* value = "/value";            // [N, L, H*d_v] packed or [N, H, L, d_v] split
// The packed layout (docs/formats.md): every sequence's rows end to end, sequence n in rows
// [offsets[n], offsets[n+1]). In an input /tokens holds the embeddings [T, d] (or /query /key
// /value are [T, H*d]); in an output /output is [T, D_out] and /lse [H, T].
inline constexpr const char* tokens = "/tokens";    // float32/64 [T, d]
inline constexpr const char* offsets = "/offsets";  // int64 [N+1], from 0 to T

// Projection weights file (run --weights), row-vector convention, stored [in, out].
inline constexpr const char* w_q = "/w_q";  // [d, H*d_k]
inline constexpr const char* w_k = "/w_k";  // [d, H*d_k]
inline constexpr const char* w_v = "/w_v";  // [d, H*d_v]
inline constexpr const char* w_o = "/w_o";  // [H*d_v, d_out], optional
inline constexpr const char* b_q = "/b_q";  // [H*d_k], optional
inline constexpr const char* b_k = "/b_k";  // [H*d_k], optional
inline constexpr const char* b_v = "/b_v";  // [H*d_v], optional
inline constexpr const char* b_o = "/b_o";  // [d_out], optional, only with /w_o

// Output of a run (lengths: see above).
inline constexpr const char* output = "/output";        // float32 [N, L, D_out]
inline constexpr const char* attention = "/attention";  // f32/f16 [B-A, H or 1, L, L]; also the maps of `weights`
inline constexpr const char* lse = "/lse";              // float32 [N, H, L], log-sum-exp per query row
inline constexpr const char* config = "/config";        // scalar string: the resolved configuration

// The resume journal inside OUTPUT.partial (output/journal.hpp).
inline constexpr const char* journal = "/journal";                          // the group
inline constexpr const char* journal_unit_bounds = "/journal/unit_bounds";  // int64 [U+1]
// int64 [U+1], only when some unit is a piece of a sequence: unit u starts at row
// unit_rows[u] of sequence unit_bounds[u] (output/journal.hpp)
inline constexpr const char* journal_unit_rows = "/journal/unit_rows";
inline constexpr const char* journal_progress = "/journal/progress";        // int64 [U, 2]: done, checksum
inline constexpr const char* journal_identity = "/journal/identity";        // string: "key = value" lines

}  // namespace dataset

// Attribute names: root attributes unless said otherwise.
namespace attribute {

// Shared by every file attnbatch writes.
inline constexpr const char* format = "format";  // one of the format:: values below
inline constexpr const char* heads = "heads";    // H
// G, the K/V heads of grouped-query attention (weights files and outputs; G = H without it).
inline constexpr const char* kv_heads = "kv_heads";
// The base of the rotary position embeddings (outputs: 0 when off; weights files: the
// model's, from its config.json, which `run` applies only when given --rope-theta).
inline constexpr const char* rope_theta = "rope_theta";

// Input and projection-weights files written by `generate`.
inline constexpr const char* generator = "generator";        // "attnbatch generate VERSION"
inline constexpr const char* seed = "seed";                  // the random seed
inline constexpr const char* dtype = "dtype";                // "float32" or "float64"
inline constexpr const char* layout = "layout";              // "embeddings", "qkv-packed" or "qkv-split"
inline constexpr const char* scale_values = "scale_values";  // the factor the data was multiplied by
inline constexpr const char* min_len = "min_len";            // the least length drawn (ragged inputs only)
inline constexpr const char* head_dim = "head_dim";          // d_k
inline constexpr const char* value_dim = "value_dim";        // d_v
inline constexpr const char* out_dim = "out_dim";            // d_out (projection weights with /w_o only)

// Output provenance (output/output_file.hpp Provenance and OutputLayout).
inline constexpr const char* format_version = "format_version";        // 1
inline constexpr const char* version = "version";                      // attnbatch's version
inline constexpr const char* creation_time = "creation_time";          // ISO 8601 UTC
inline constexpr const char* input_file = "input_file";                // the run's --input, as given
inline constexpr const char* input_file_absolute = "input_file_absolute";  // the same, absolute
inline constexpr const char* weights_file = "weights_file";            // the run's --weights (projections), as given; only with them
inline constexpr const char* weights_file_absolute = "weights_file_absolute";  // the same, absolute
inline constexpr const char* input_dataset = "input_dataset";          // "/embeddings", or "/q,/k,/v"
inline constexpr const char* causal = "causal";                        // 0 or 1
inline constexpr const char* scale = "scale";                          // the softmax scale used
inline constexpr const char* save_weights = "save_weights";            // which attention maps: "none", "all" or "mean"
inline constexpr const char* weights_dtype = "weights_dtype";          // the attention maps' "f32" or "f16"
inline constexpr const char* weights_sequences = "weights_sequences";  // [A, B]: sequences with stored attention maps
inline constexpr const char* ranks = "ranks";                          // MPI ranks of the run
inline constexpr const char* threads = "threads";                      // threads per rank
inline constexpr const char* io_mode = "io_mode";                      // "gather" or "parallel"
inline constexpr const char* precision = "precision";                  // the kernel's: "fp32" or "bf16"
inline constexpr const char* config_dataset = "config_dataset";        // where the configuration is: /config
inline constexpr const char* d_k = "d_k";                              // query/key width per head
inline constexpr const char* d_v = "d_v";                              // value width per head
// "packed" on an output (and a generated input) in the packed layout; absent: padded [N, L, ...]
inline constexpr const char* sequence_layout = "sequence_layout";
// 1 once every sequence is written, 0 before: an output counts only when it says 1.
inline constexpr const char* complete = "complete";

// On the root of an output: the input sequence of row 0 of /output, /lse and /lengths
// (run --sequences; 0 otherwise). On /attention: the input sequence of its row 0.
inline constexpr const char* first_sequence = "first_sequence";
inline constexpr const char* mean_over_heads = "mean_over_heads";  // 1 for --save-weights mean

// On /journal/identity.
inline constexpr const char* hash = "hash";  // XXH3-64 of the identity text

// On the /attention maps of `weights` (plus `heads` on the dataset: the heads selected).
inline constexpr const char* sequences = "sequences";  // the sequences of its rows
inline constexpr const char* source = "source";        // root: the output the maps came from
inline constexpr const char* source_absolute = "source_absolute";  // root: its real path

// Projection-weights files written by `import-weights` (plus heads, kv_heads, rope_theta, source: the
// absolute path of the model file).
inline constexpr const char* source_format = "source_format";  // "safetensors"
inline constexpr const char* layer = "layer";                  // the layer's prefix in the model ("" at the top)
inline constexpr const char* naming = "naming";                // "nn.MultiheadAttention", "bert" or "llama"
inline constexpr const char* tensors = "tensors";              // the model tensors read, comma-separated
inline constexpr const char* model_type = "model_type";        // config.json's model_type, when there was one
inline constexpr const char* source_tensor = "source_tensor";  // on each dataset: what it was made from

}  // namespace attribute

// Dimension scales of an output (docs/formats.md "dimension scales"): the names netCDF readers such
// as xarray's h5netcdf engine give the axes. Each is a 1-D dataset at the root, of the axis'
// length, marked as a netCDF dimension that is not a variable (it holds no values).
namespace dimension {
inline constexpr const char* n = "N";          // sequences
inline constexpr const char* len = "L";        // tokens (query rows)
inline constexpr const char* d_out = "D_out";  // columns of /output
inline constexpr const char* heads = "H";      // heads of /lse and /attention
inline constexpr const char* len_k = "L_k";    // keys of /attention
inline constexpr const char* n_w = "N_w";      // sequences of /attention when --weights-seqs keeps fewer than N
inline constexpr const char* head_mean = "H_mean";  // the one "head" of --save-weights mean
inline constexpr const char* tokens = "T";          // rows of a packed output's /output and /lse
inline constexpr const char* offsets = "N+1";       // a packed output's /offsets
}  // namespace dimension

// Values of the root attribute `format`, which say what a file is.
namespace format {
inline constexpr const char* input = "attnbatch-input";
inline constexpr const char* weights = "attnbatch-weights";
inline constexpr const char* output = "attnbatch-output";
inline constexpr const char* attention_maps = "attnbatch-attention-maps";  // written by `weights --to FILE.h5`
}  // namespace format

}  // namespace attnbatch::io
