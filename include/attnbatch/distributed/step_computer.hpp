// One step's compute on one rank (a run of whole sequences, padded or packed, or a piece of
// one sequence: some of its query rows): project, attend, project the output. It makes no MPI or HDF5 call, so it runs on a thread of its own while the rank's
// main thread reads and writes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/io/models/weights_reader.hpp"
#include "attnbatch/io/output/output_file.hpp"
#include "attnbatch/kernels/attention.hpp"

namespace attnbatch::distributed {

struct AttentionSettings {
    bool causal = false;
    float scale = 0.0f;  // already resolved (1/sqrt(d_k) by default)
    double rope_theta = 0.0;  // rotary embeddings on Q and K (kernels/rope.hpp); 0: none
    kernels::KernelOptions kernel;
};

// What the compute of some units did.
struct ComputeTally {
    std::int64_t sequences = 0, tokens = 0;
    double attention_flops = 0, projection_flops = 0;
};

class StepComputer {
public:
    StepComputer(const io::InputSpec& spec, const std::optional<io::ProjectionWeights>& weights,
                 const AttentionSettings& settings, const io::OutputLayout& layout);
    ~StepComputer();
    StepComputer(StepComputer&&) noexcept;
    StepComputer& operator=(StepComputer&&) = delete;

    // Fills `block` (output, lse, lengths, attention) for the sequences (or the piece) of `in`,
    // in the canonical layout of io::OutputBlock; the block points into this object's
    // buffers, valid until the next compute().
    void compute(const io::InputBlock& in, io::OutputBlock& block, ComputeTally& tally);

private:
    class Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace attnbatch::distributed
