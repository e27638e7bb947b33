// The resident memory of a rank as a function of the sequences in its step, so that the job
// can size steps (and the units they are made of) by --max-memory, independently of the
// number of ranks: every unit is then computed the same way whoever computes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <vector>

#include "attnbatch/distributed/plan.hpp"
#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/output/output_file.hpp"
#include "attnbatch/kernels/attention.hpp"

namespace attnbatch::distributed {

// Resident bytes of the buffers one step needs, per sequence, and what does not depend on
// the step size (kernel workspace, packed projection weights, a margin for the process).
struct MemoryModel {
    std::size_t per_sequence = 0;
    std::size_t per_weights_sequence = 0;  // attention maps of a sequence that stores them
    std::size_t fixed = 0;
};

// `in_flight`: blocks resident at once (2 with double buffering: one computed while the
// previous is written and the next read; 3 on rank 0 of a gathered run, which also holds
// another rank's block in transit). `rope`: rotary embeddings are applied (a table, and
// rotated copies of unprojected Q and K).
MemoryModel memory_model(const io::InputSpec& spec, const io::OutputLayout& layout,
                         const kernels::KernelOptions& kernel, int in_flight = 2, bool rope = false);

// The most sequences a step may hold under `max_memory` (at least 1, at most n). Throws
// Error (exit 2) when one sequence does not fit, naming the options that shrink it.
std::int64_t sequences_per_step(const MemoryModel& model, std::size_t max_memory, std::int64_t n);

std::string format_bytes(double bytes);

// The same buffers by rows, for pieces of sequences and the packed layout (plan.hpp's
// RowMemory), with `in_flight` copies; the budget is what `max_memory` leaves beside
// model.fixed (0 when nothing is left).
RowMemory row_memory(const io::InputSpec& spec, const io::OutputLayout& layout, const MemoryModel& model,
                     std::size_t max_memory, int in_flight = 2);

// Any sequence runs in row slabs as long as its keys and values fit: throws Error (exit 2)
// naming the first longest sequence, its length and the memory it needs when they do not fit
// beside the fixed part and one query row.
void check_sequences_fit(const std::vector<std::int32_t>& lengths, const MemoryModel& model, const RowMemory& rows,
                         std::size_t max_memory);

}  // namespace attnbatch::distributed
