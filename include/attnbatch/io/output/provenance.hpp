// What a run records of itself in its output: root attributes and /config (output_file.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "attnbatch/kernels/attention_spec.hpp"

namespace attnbatch::io {

// Recorded as root attributes (and /config); the CLI fills it. Under MPI-IO every rank must
// pass identical values (attribute writes are collective): set creation_time on one rank and
// broadcast it rather than letting each rank read its own clock.
// Now, as ISO 8601 UTC; SOURCE_DATE_EPOCH (reproducible-builds.org), when set, pins it so
// that two runs can make byte-identical files.
std::string creation_time_now();

struct Provenance {
    std::string version;
    std::string creation_time;  // empty: creation_time_now()
    std::string input_file;           // as given
    std::string input_file_absolute;  // empty: not recorded
    std::string weights_file;         // as given; empty without projection weights
    std::string weights_file_absolute;
    std::string input_dataset;  // "/embeddings", or "/q,/k,/v" for Q/K/V input
    std::int64_t heads = 0;
    std::int64_t kv_heads = 0;  // G; 0: recorded as H
    std::int64_t d_k = 0, d_v = 0;
    kernels::AttentionSpec attention;  // its scale as the kernels used it (resolved)
    std::int64_t ranks = 1;
    std::int64_t threads = 1;
    std::string io_mode = "gather";
    std::string config;  // the full resolved configuration text
};

}  // namespace attnbatch::io
