// A step as the kernel sees it: whatever the layout (padded or packed whole sequences, or a
// piece of one sequence), a list of row ranges, one per sequence: its query rows [q0, q0 + rows)
// with its first `keys` keys, where their data are in the step's input and where their results
// go in the step's output. The compute path (step_computer.cpp) knows nothing else of layouts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/distributed/step_computer.hpp"
#include "attnbatch/io/output/output_file.hpp"

namespace attnbatch::distributed {

// The rows of one operand of the step's input (x, or q, k or v): element strides between its
// heads and between its rows, the last axis contiguous. A range's rows start at its own offset.
struct OperandView {
    const float* base = nullptr;
    std::ptrdiff_t head = 0, row = 0;
};

struct RowRange {
    std::int64_t sequence = 0;  // in the step: 0 .. count-1
    std::int32_t length = 0;    // its valid tokens
    int q0 = 0;                 // position of the first query row in its sequence
    int rows = 0;               // query rows written: positions [q0, q0 + rows)
    int query_rows = 0;         // of them below the length: those with data
    int keys = 0;               // keys handed to the kernel (len_k)
    int key_rows = 0;           // of them below the length: those with data
    bool maps = false;          // its attention maps are stored
    // Its data: element offsets (head 0) of its first query row in q (or x) and of its first key
    // row in k and v (or x).
    std::size_t query_at = 0, key_at = 0, value_at = 0;
    // Its results: its first row of /output; its lse, head h row r at lse_at + h * lse_head_stride + r;
    // its attention maps (H_w, rows, L) from map_at.
    std::size_t output_row = 0;
    std::size_t lse_at = 0, lse_head_stride = 0;
    std::size_t map_at = 0;
};

struct StepRows {
    std::vector<RowRange> ranges;  // in the step's order; sequences without rows left out
    OperandView q, k, v;           // as read: x for all three with embeddings
    std::size_t output_rows = 0, lse_elements = 0, map_elements = 0;
    std::int64_t sequences_done = 0;  // sequences whose last rows this step computes
};

// The ranges of `in` (any layout). Throws std::invalid_argument when a length lies outside [0, L].
StepRows describe_rows(const io::InputSpec& spec, const io::OutputLayout& layout, const io::InputBlock& in);
// The same with the data at `data` rather than in the block's vectors.
StepRows describe_rows(const io::InputSpec& spec, const io::OutputLayout& layout, const io::InputBlock& in,
                       const StepData& data);

}  // namespace attnbatch::distributed
