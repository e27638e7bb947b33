// Whether a projection weights file is consistent on its own (SPEC.md `run --weights`):
// /w_q [d, H*d_k], /w_k [d, G*d_k], /w_v [d, G*d_v], optional /w_o [H*d_v, d_out], optional
// biases matching their matrices' columns. The agreement with an input's d is describe_input's
// job (inspect INPUT --weights FILE).
#pragma once

#include "attnbatch/io/h5/file_schema.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace attnbatch::io {

struct WeightsCheck {
    std::int64_t d = 0, qk_width = 0, v_width = 0, d_out = 0;  // d_out: 0 without /w_o
    std::int64_t k_width = 0;            // columns of /w_k (G*d_k)
    std::int64_t heads = 0, kv_heads = 0;  // from --heads or the file's attributes; 0: not known
    std::vector<std::string> present;   // the datasets found, in SPEC order
    std::vector<std::string> problems;  // one line each

    bool valid() const { return problems.empty(); }
};

// `heads` > 0 (else the file's attribute `heads`) also checks that H divides the widths and
// the K/V heads G = H * (columns of w_k) / (columns of w_q) those of w_v.
WeightsCheck check_weights(const std::string& file, const FileSchema& schema, int heads);

}  // namespace attnbatch::io
