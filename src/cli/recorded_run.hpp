// A finished run read back from its output: its input (the files and datasets from /config),
// its attention settings (typed, from the root attributes), and the
// Q, K, V of any of its sequences as the kernel saw them (float; projections in double,
// then rounded). `verify` and `weights` recompute from this.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/io/models/weights_reader.hpp"
#include "attnbatch/io/output/output_reader.hpp"
#include "attnbatch/kernels/attention.hpp"
#include "attnbatch/kernels/attention_spec.hpp"

namespace attnbatch::cli {

struct RecordedRun {
    io::InputSpec input;  // narrowed to the sequences the output holds (run --sequences)
    std::optional<io::ProjectionWeights> projections;
    kernels::AttentionSpec attention;  // as the output records it, scale resolved
    std::string save_weights = "all";
    bool maps_f16 = false;  // attention maps stored as f16 (--weights-dtype f16)
    // The journal's identity of the run (/journal/identity, key = value); empty for an output
    // that has none.
    std::map<std::string, std::string> identity;
    // Its value for `key`, "" when it records none.
    std::string identity_field(const std::string& key) const;
};

// `input_path` and `weights_path` override the files the run recorded (empty: the recorded
// ones, found from any directory by find_recorded_file).
RecordedRun read_recorded_run(const io::OutputReader& output, const std::string& input_path,
                              const std::string& weights_path);

// A file a run recorded (`role` "input" or "weights"), wherever the command runs: the absolute
// path recorded (in the attributes, or in `identity`, the journal's fields), then the path as
// the run was given it, from here and from the output's directory. Error (exit 4) naming every
// path tried when none is a file; empty when the run recorded no such file.
std::string find_recorded_file(const io::OutputReader& output, const std::map<std::string, std::string>& identity,
                               const std::string& role);

// One sequence's inputs; `params` (batch 1, no outputs set) points into q, k, v.
struct SequenceInputs {
    SequenceInputs() = default;
    SequenceInputs(const SequenceInputs&) = delete;
    SequenceInputs& operator=(const SequenceInputs&) = delete;
    std::vector<float> q, k, v;
    std::vector<float> x;  // the embeddings as read (for the output projection's rows)
    std::int32_t length = 0;
    kernels::AttentionParams params;
};

void load_sequence(const RecordedRun& run, io::InputReader& reader, std::int64_t sequence, SequenceInputs& out);

// Y (L, out) = X (L, in) W (in, out) + b in double; rows past `rows` zero.
std::vector<double> project64(const float* x, std::size_t len, std::size_t rows, std::size_t in,
                              const std::vector<float>& w, const std::vector<float>& b, std::size_t out);

}  // namespace attnbatch::cli
