// Whether a projection weights file is consistent on its own (SPEC.md `run --weights`):
// /w_q [d, H*d_k], /w_k like /w_q, /w_v [d, H*d_v], optional /w_o [H*d_v, d_out], optional
// biases matching their matrices' columns. The agreement with an input's d is describe_input's
// job (inspect INPUT --weights FILE).
#pragma once

#include "attnbatch/io/file_schema.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace attnbatch::io {

struct WeightsCheck {
    std::int64_t d = 0, qk_width = 0, v_width = 0, d_out = 0;  // d_out: 0 without /w_o
    std::vector<std::string> present;   // the datasets found, in SPEC order
    std::vector<std::string> problems;  // one line each

    bool valid() const { return problems.empty(); }
};

// `heads` > 0 also checks that H divides both widths.
WeightsCheck check_weights(const std::string& file, const FileSchema& schema, int heads);

}  // namespace attnbatch::io
