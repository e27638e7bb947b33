// One step's compute on one rank (a run of whole sequences, padded or packed, or a piece of
// one sequence: some of its query rows): project, attend, project the output. It makes no MPI
// or HDF5 call, so it runs on a thread of its own while the rank's main thread reads and writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>

#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/io/models/weights_reader.hpp"
#include "attnbatch/io/output/output_file.hpp"
#include "attnbatch/kernels/attention.hpp"
#include "attnbatch/kernels/attention_spec.hpp"

namespace attnbatch::distributed {

struct AttentionSettings {
    kernels::AttentionSpec spec;    // scale resolved (AttentionSpec::resolved)
    kernels::KernelOptions kernel;  // how the kernels run; its precision is spec.precision
};

// What the compute of some units did.
struct ComputeTally {
    std::int64_t sequences = 0, tokens = 0;
    double attention_flops = 0, projection_flops = 0;
    // CPU seconds its threads (the caller and its OpenMP team) used, and of them the system's.
    double cpu = 0, cpu_system = 0;
};

// Where one step's results live until they are stored: the io::OutputBlock that compute()
// fills points here. One per step in flight (the coordinator's two slots). Its buffers are
// kept from step to step and only grow, never cleared (each step writes every element it
// hands out), so that a step of the usual size touches no fresh page.
class StepOutputs {
public:
    template <class T>
    class Buffer {
    public:
        // At least n elements, their values unspecified.
        T* reserve(std::size_t n);
        T* data() const noexcept { return data_.get(); }

    private:
        struct Free {
            void operator()(T* p) const noexcept { std::free(p); }
        };
        std::unique_ptr<T, Free> data_;
        std::size_t capacity_ = 0;
    };

    Buffer<float> output, lse, maps_f32;
    Buffer<std::uint16_t> maps_f16;  // IEEE binary16 bits
};

// Where a step's data are: by default the io::InputBlock's own vectors; a caller holding the
// data in arrays of its own, laid out as the block's would be (the Python module's numpy
// arrays), hands their addresses instead, and the compute reads them in place, uncopied.
struct StepData {
    const float* x = nullptr;  // embeddings mode
    const float* q = nullptr;  // Q/K/V mode
    const float* k = nullptr;
    const float* v = nullptr;
    static StepData of(const io::InputBlock& in) noexcept {
        const auto at = [](io::InputBlock::InPlace in_place, const std::vector<float>& copy) {
            return in_place.data ? in_place.data : copy.data();
        };
        return {at(in.x_in_place, in.x), at(in.q_in_place, in.q), at(in.k_in_place, in.k), at(in.v_in_place, in.v)};
    }
};

// Built once per job: it packs the projection weights once, and its scratch (the rows being
// projected and attended, the kernels' workspaces, one set per thread) serves every step. One
// compute() at a time.
class StepComputer {
public:
    // `staging_bytes` bounds the scratch of one chunk of a step's sequences (their projected
    // or rotated Q, K, V and their attention output before w_o): the sequences pass through it a
    // few at a time, so that those rows are still in the cache when the kernel and w_o read them
    // (0: 1 MiB, about a core's L2). The results do not depend on it.
    StepComputer(const io::InputSpec& spec, const std::optional<io::ProjectionWeights>& weights,
                 const AttentionSettings& settings, const io::OutputLayout& layout, std::size_t staging_bytes = 0);
    ~StepComputer();
    StepComputer(StepComputer&&) noexcept;
    StepComputer& operator=(StepComputer&&) = delete;

    // Fills `block` (output, lse, lengths, attention) for the sequences (or the piece) of `in`,
    // in the canonical layout of io::OutputBlock; the block points into `outputs` and into `in`
    // (lengths), valid until their next use.
    void compute(const io::InputBlock& in, StepOutputs& outputs, io::OutputBlock& block, ComputeTally& tally);
    // The same with the data read from `data` (the block's vectors may then be empty; its
    // lengths, offsets and piece fields still describe the step).
    void compute(const io::InputBlock& in, const StepData& data, StepOutputs& outputs, io::OutputBlock& block,
                 ComputeTally& tally);

private:
    class Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace attnbatch::distributed
