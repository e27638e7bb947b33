// What a projection-weights file must hold (docs/formats.md `run --weights`), stated once:
//   /w_q [d, H*d_k], /w_k [d, G*d_k], /w_v [d, G*d_v], float32 or float64, row-vector
//   convention; optional /w_o [H*d_v, d_out]; optional biases /b_q [H*d_k], /b_k [G*d_k],
//   /b_v [G*d_v], /b_o [d_out] (only with /w_o); H from --heads, else the root attribute
//   `heads` (a contradicting option exits 2); G from --kv-heads, else `kv_heads`, else the
//   widths (G K/V heads dividing H).
// The same rules serve `run` (describe_weights: the first broken rule is the Error, exit 2
// for options, 3 for the file's content, 4 for I/O) and `inspect` (check_weights: every broken
// rule listed, from the file's schema).
#pragma once

#include "attnbatch/io/h5/file_schema.hpp"
#include "attnbatch/io/h5/type_info.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace attnbatch::io {

// A weights file that follows the rules: its shapes, and what it says of itself.
struct WeightsSpec {
    std::string path;
    std::int64_t d_in = 0;      // rows of w_q, w_k, w_v: the embedding width d
    std::int64_t qk_width = 0;  // H*d_k: columns of w_q (and of w_k without grouped-query attention)
    std::int64_t v_width = 0;   // G*d_v: columns of w_v (H*d_v, the rows of w_o, when G = H)
    std::int64_t k_width = 0;   // G*d_k: columns of w_k; 0: qk_width
    bool has_w_o = false;
    std::int64_t d_out = 0;     // columns of w_o (0 without it)
    bool has_b_q = false, has_b_k = false, has_b_v = false, has_b_o = false;
    DataType dtype = DataType::float32;  // float64 when any matrix is float64
    // What the file says of itself (root attributes; 0 when absent): the head counts it was
    // made for, and the rotary base of the model it was imported from (import-weights).
    std::int64_t file_heads = 0, file_kv_heads = 0;
    double file_rope_theta = 0;

    std::int64_t key_width() const { return k_width > 0 ? k_width : qk_width; }
    // The datasets the file has, in the documented order: /w_q, /w_k, /w_v, then /w_o and the biases it has.
    std::vector<const char*> datasets() const;
};

// What the caller knows besides the file.
struct WeightsRequest {
    int heads = 0, kv_heads = 0;  // --heads, --kv-heads; 0: not given
    std::int64_t d = 0;           // the width of the embeddings they project; 0: not known
    std::string d_source;         // where d comes from, for messages ("in.h5:/embeddings")
};

struct DescribedWeights {
    WeightsSpec spec;
    std::int64_t heads = 0;     // H: the request's, else the file's, else 1
    std::int64_t kv_heads = 0;  // G
};

// `run`: opens the file read-only and applies every rule; Error as above.
DescribedWeights describe_weights(const std::string& path, const WeightsRequest& request);

// `inspect`: the rules on a file's schema (and, for a dataset with filters, whether this HDF5
// can decode it, as run finds out). H is `heads` when > 0, else the file's attribute, else
// unknown (the rules that need it are then left out). The values are not scanned here.
struct WeightsCheck {
    std::int64_t d = 0, qk_width = 0, v_width = 0, d_out = 0;  // d_out: 0 without /w_o
    std::int64_t k_width = 0;              // columns of /w_k (G*d_k)
    std::int64_t heads = 0, kv_heads = 0;  // 0: not known
    std::vector<std::string> present;      // the datasets found, in the documented order
    std::vector<std::string> problems;     // one line each
    WeightsSpec spec;                      // what to scan the values of (ValueScanner), when valid

    bool valid() const { return problems.empty(); }
};
WeightsCheck check_weights(const std::string& file, const FileSchema& schema, int heads);

}  // namespace attnbatch::io
