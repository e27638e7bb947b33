// One process's run: for each unit of sequences, read the input, project, attend, project
// the output, write. The MPI coordinator hands units to this same code.
#pragma once

#include <cstdint>
#include <optional>

#include "attnbatch/io/input.hpp"
#include "attnbatch/io/input_reader.hpp"
#include "attnbatch/io/output.hpp"
#include "attnbatch/kernels/attention.hpp"

namespace attnbatch::dist {

struct AttentionSettings {
    bool causal = false;
    float scale = 0.0f;  // already resolved (1/sqrt(d_k) by default)
    kernels::KernelOptions kernel;
};

struct PhaseTimes {
    double read = 0, compute = 0, write = 0;
    std::int64_t units = 0, sequences = 0, tokens = 0;
    double attention_flops = 0, projection_flops = 0;
};

// Computes and writes sequences [first, last) in units of `unit_sequences`.
PhaseTimes run_sequences(const io::InputSpec& spec, const std::optional<io::ProjectionWeights>& weights,
                         const AttentionSettings& settings, io::InputReader& reader, io::OutputFile& output,
                         std::int64_t first, std::int64_t last, std::int64_t unit_sequences);

}  // namespace attnbatch::dist
