// Work planning for distributed runs: a predicted cost per sequence, units of consecutive
// sequences (or of the query rows of one long sequence, a "piece"), and the ways of sharing
// units among ranks (static contiguous or LPT, and a simulation of the dynamic schedule for
// --dry-run).
//
// Pure computation: no MPI, no HDF5. Every function is deterministic (same inputs, same
// result on every rank: the arithmetic runs in one fixed order), O(N) in memory, and fast
// enough for 10^7 sequences and thousands of ranks. Invalid arguments throw
// std::invalid_argument.
#pragma once

#include <cstdint>
#include <vector>

namespace attnbatch::distributed {

// Predicted cost of one sequence of `len` valid tokens, in flops.
struct CostModel {
    std::int64_t heads = 1, d_k = 0, d_v = 0;
    std::int64_t kv_heads = 0;  // G, the K/V heads (0: G = H)
    std::int64_t d_in = 0;   // embedding width when projections run (0: no projections)
    std::int64_t d_out = 0;  // columns of w_o (0: no output projection)
    bool causal = false;

    // attention:   2 * pairs * H * (d_k + d_v), pairs = len^2 (len (len + 1) / 2 when causal)
    // projections: 2 * len * d_in * (H d_k + G d_k + G d_v) when d_in > 0,
    //              plus 2 * len * H * d_v * d_out with w_o
    // data:        (len + kSequenceOverheadTokens) * (input width + output width) + 1, one
    //              "flop" per float read or written, the overhead standing for the fixed
    //              cost of a sequence (so that length-0 sequences are not free).
    double sequence_flops(std::int64_t len) const;

    // Predicted cost of query rows [row_first, row_last) of a sequence of `len` valid tokens
    // (rows at or past len cost nothing): their attention pairs, the projections of those rows
    // and of the keys and values among the first `key_rows` past the first `keys_projected`
    // (those the piece before projected, on the rank that computes both), and the data moved:
    // the keys and values read (again, for every piece of a split sequence) and the rows
    // written. A piece covering the whole sequence costs about what the sequence does.
    double piece_flops(std::int64_t len, std::int64_t row_first, std::int64_t row_last, std::int64_t key_rows,
                       std::int64_t keys_projected = 0) const;

    double key_value_heads() const { return static_cast<double>(kv_heads > 0 ? kv_heads : heads); }
};

// Equivalent token count charged to every sequence for its fixed cost.
inline constexpr std::int64_t kSequenceOverheadTokens = 16;

// Units per run the cost cap aims at (between kPlanGranularity and twice as many when the
// cap is total / kPlanGranularity). 2^20 rather than 2^18: at 10^7 Zipf lengths and 4096 ranks
// it halves the contiguous imbalance (0.3-0.5% instead of 0.7-1%), for planning times still
// below 0.5 s (tests/distributed/plan_compare.cpp).
inline constexpr std::int64_t kPlanGranularity = std::int64_t{1} << 20;

// Sequences [first, last), their predicted cost and their valid tokens (sum of lengths); or a
// piece: the query rows [row_first, row_last) of sequence `first` (last = first + 1) with its
// first `key_rows` keys and values (all valid ones; with causal masking those up to row_last).
struct Unit {
    std::int64_t first = 0, last = 0;
    double cost = 0;
    std::int64_t tokens = 0;  // valid query rows (a piece: those of its rows below the length)
    std::int64_t row_first = 0, row_last = 0, key_rows = 0;  // a piece; row_last = 0: whole sequences
    bool ends_sequence = false;  // a piece holding the last row of its sequence
    // Resident bytes of the unit's data in a step, and of those the keys and values that
    // consecutive pieces of one sequence share (0: memory is bounded by max_sequences alone).
    std::uint64_t bytes = 0, shared_bytes = 0;

    bool piece() const noexcept { return row_last > 0; }
    // Sequences this unit finishes: a piece finishes its sequence only with its last row.
    std::int64_t sequences_done() const noexcept { return piece() ? (ends_sequence ? 1 : 0) : last - first; }
};

// Splitting long sequences into pieces. Each piece reads its sequence's keys and values, so a
// piece is never under kPieceRows query rows and piece bounds fall on multiples of kPieceRows
// (the last piece ends with the sequence's rows).
inline constexpr std::int64_t kPieceRows = 16;
// With P ranks, a sequence costlier than total / (P * kPiecesPerRank) is split into pieces of
// about that cost: no unit then outweighs a sixteenth of a rank's even share.
inline constexpr std::int64_t kPiecesPerRank = 32;

// Resident bytes of a step's data by rows (memory_model.hpp fills it). A sequence s of
// `rows` query rows and `keys` key rows takes rows * (query_row + weights_row if s stores
// weights) + keys * key_row.
struct RowMemory {
    std::uint64_t budget = 0;       // what one step's data may take; 0: memory splits nothing
    std::uint64_t query_row = 0;    // per query row: input, Q, attended, output and lse rows
    std::uint64_t key_row = 0;      // per key row: the keys and values as read and as projected
    std::uint64_t weights_row = 0;  // per query row of a sequence whose weights are stored
    std::int64_t weights_first = 0, weights_last = 0;  // those sequences [first, last)

    std::uint64_t row_bytes(std::int64_t sequence) const noexcept {
        return query_row + (sequence >= weights_first && sequence < weights_last ? weights_row : 0);
    }
    std::uint64_t bytes(std::int64_t sequence, std::int64_t rows, std::int64_t keys) const noexcept {
        return static_cast<std::uint64_t>(rows) * row_bytes(sequence) + static_cast<std::uint64_t>(keys) * key_row;
    }
};

// What form_units may split, and why.
struct SplitOptions {
    int ranks = 1;              // > 1: split sequences costlier than total / (ranks * kPiecesPerRank)
    double max_piece_cost = 0;  // > 0: also split sequences costlier than this (a step's compute cap)
    // Rows of every sequence in the output: L in the padded layout (a padded sequence's last
    // piece also holds its padding rows); 0: the sequence's length (the packed layout).
    std::int64_t padded_rows = 0;
    RowMemory memory;  // a sequence whose data exceed memory.budget is split into row slabs that fit
};

// Cuts sequences 0..N-1 into contiguous units, independently of the number of ranks: a unit
// closes when it holds max_sequences sequences (the memory bound) or before the sequence
// that would take its cost past cap = max(total cost / kPlanGranularity, cost of the
// costliest single sequence). So no unit costs more than the cap, and a unit with its next
// sequence would (units <= 2 kPlanGranularity + N / max_sequences + 1). N = 0 gives no
// units. Throws on max_sequences < 1 or a negative length.
std::vector<Unit> form_units(const std::vector<std::int32_t>& lengths, const CostModel& model,
                             std::int64_t max_sequences);

// The same, splitting long sequences into pieces as `split` says. A split sequence becomes
// consecutive pieces whose rows cover [0, rows of the sequence) (rows: split.padded_rows, or
// its length); the cuts balance the pieces' attention pairs (quadratic in the row with causal
// masking), and memory splits cap every piece at the rows that fit beside its keys and values.
// The cap on whole-sequence units is then max(total / kPlanGranularity, costliest unsplit
// sequence). Whole units also close before their data would exceed split.memory.budget, and
// carry their bytes when split.memory says how much a row takes. With no split at all this is
// form_units() above, unit for unit.
std::vector<Unit> form_units(const std::vector<std::int32_t>& lengths, const CostModel& model,
                             std::int64_t max_sequences, const SplitOptions& split);

// The units whose sequences start at bounds[u] and end before bounds[u+1] (bounds rise from
// 0 to N), with costs and tokens as form_units() computes them: the units a resumed run
// takes over from its journal.
std::vector<Unit> units_with_bounds(const std::vector<std::int32_t>& lengths, const CostModel& model,
                                    const std::vector<std::int64_t>& bounds);

// Units from journal positions: unit u runs from position (bounds[u], rows[u]) to
// (bounds[u+1], rows[u+1]), a position (s, r) being row r of sequence s, (s, 0) its start.
// Whole units start and end at row 0; a piece of sequence s ends at (s, r) or, with its last
// row, at (s + 1, 0). Empty `rows`: all 0 (whole units only). Costs, tokens, key rows and
// bytes as form_units() would give them. Throws std::invalid_argument when the positions do
// not rise from (0, 0) to (N, 0) or a row lies outside its sequence.
std::vector<Unit> units_with_positions(const std::vector<std::int32_t>& lengths, const CostModel& model,
                                       const std::vector<std::int64_t>& bounds, const std::vector<std::int64_t>& rows,
                                       const SplitOptions& split);

// The journal's positions of units (the inverse of units_with_positions): bounds [U+1], and
// rows [U+1] (empty when no unit is a piece).
std::vector<std::int64_t> unit_bounds_of(const std::vector<Unit>& units);
std::vector<std::int64_t> unit_rows_of(const std::vector<Unit>& units);

enum class StaticStrategy { contiguous, lpt };

struct RankShare {
    std::vector<std::int64_t> units;  // unit indices, ascending
    double cost = 0;
    std::int64_t sequences = 0, tokens = 0;
};

struct Plan {
    std::vector<RankShare> ranks;
    double imbalance = 0;  // max rank cost / mean rank cost - 1 (0 when the total cost is 0)
};

// contiguous: rank r gets a contiguous run of units (one ordered block of sequences, for
//   I/O), split over the cost prefix sums: the costliest run is the smallest any contiguous
//   split achieves (bisection over greedy covers), and each boundary is the one nearest to
//   r/P of the total cost that keeps that optimum, so the other ranks stay even as well.
// lpt: longest processing time first (ties: lower unit index) onto the least loaded rank
//   (ties: lowest rank); each rank's list sorted ascending.
// Ranks may exceed the number of units: the ranks left over get empty shares. ranks >= 1.
Plan plan_static(const std::vector<Unit>& units, int ranks, StaticStrategy strategy);

// What --schedule dynamic would do with equally fast ranks: units taken in order by whichever
// rank is free first (ties: lowest rank). For --dry-run predictions.
Plan simulate_dynamic(const std::vector<Unit>& units, int ranks);

// What a step holds so far, to decide whether the next unit may join it.
struct StepLoad {
    std::int64_t sequences = 0;  // whole sequences
    std::uint64_t bytes = 0;     // resident bytes of its data
    std::uint64_t shared = 0;    // of those, the keys and values of its (last) piece's sequence
    void add(const Unit& unit) noexcept;
};

// Whether units[next] may join a step that ends with units[previous] and holds `load`: they
// are consecutive units (next = previous + 1) of the same kind that continue each other (whole
// units: previous.last == next.first; pieces: of one sequence, rows continuing), and the step
// stays within max_sequences whole sequences and, when max_bytes > 0, max_bytes (pieces of
// one sequence in one step hold its keys and values once).
bool joins(const std::vector<Unit>& units, std::int64_t previous, std::int64_t next, const StepLoad& load,
           std::int64_t max_sequences, std::uint64_t max_bytes);

// Consecutive units of a share merged for I/O in big contiguous blocks: sequences
// [first, last) made of units[first_unit, first_unit + unit_count) (rows [row_first, row_last)
// of sequence `first` for pieces). Adjacent entries of unit_indices merge when joins() says
// so. Throws when a unit alone exceeds max_sequences (or max_bytes) or an index is out of range.
struct Step {
    std::int64_t first = 0, last = 0;
    std::int64_t first_unit = 0, unit_count = 0;
    std::int64_t row_first = 0, row_last = 0;  // pieces: their rows; 0, 0 for whole sequences
};
std::vector<Step> merge_into_steps(const std::vector<Unit>& units, const std::vector<std::int64_t>& unit_indices,
                                   std::int64_t max_sequences, std::uint64_t max_bytes = 0);

}  // namespace attnbatch::distributed
