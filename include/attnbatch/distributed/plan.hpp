// Work planning for distributed runs: a predicted cost per sequence, units of consecutive
// sequences cut independently of the number of ranks, and the ways of sharing units among
// ranks (static contiguous or LPT, and a simulation of the dynamic schedule for --dry-run).
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
};

// Equivalent token count charged to every sequence for its fixed cost.
inline constexpr std::int64_t kSequenceOverheadTokens = 16;

// Units per run the cost cap aims at (between kPlanGranularity and twice as many when the
// cap is total / kPlanGranularity). 2^20 rather than 2^18: at 10^7 Zipf lengths and 4096 ranks
// it halves the contiguous imbalance (0.3-0.5% instead of 0.7-1%), for planning times still
// below 0.5 s (tests/distributed/plan_compare.cpp).
inline constexpr std::int64_t kPlanGranularity = std::int64_t{1} << 20;

// Sequences [first, last), their predicted cost and their valid tokens (sum of lengths).
struct Unit {
    std::int64_t first = 0, last = 0;
    double cost = 0;
    std::int64_t tokens = 0;
};

// Cuts sequences 0..N-1 into contiguous units, independently of the number of ranks: a unit
// closes when it holds max_sequences sequences (the memory bound) or before the sequence
// that would take its cost past cap = max(total cost / kPlanGranularity, cost of the
// costliest single sequence). So no unit costs more than the cap, and a unit with its next
// sequence would (units <= 2 kPlanGranularity + N / max_sequences + 1). N = 0 gives no
// units. Throws on max_sequences < 1 or a negative length.
std::vector<Unit> form_units(const std::vector<std::int32_t>& lengths, const CostModel& model,
                             std::int64_t max_sequences);

// The units whose sequences start at bounds[u] and end before bounds[u+1] (bounds rise from
// 0 to N), with costs and tokens as form_units() computes them: the units a resumed run
// takes over from its journal.
std::vector<Unit> units_with_bounds(const std::vector<std::int32_t>& lengths, const CostModel& model,
                                    const std::vector<std::int64_t>& bounds);

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

// Consecutive units of a share merged for I/O in big contiguous blocks: sequences
// [first, last) made of units[first_unit, first_unit + unit_count). Adjacent entries of
// unit_indices merge when they are consecutive units (index + 1 and last == next.first) and
// the step stays within max_sequences. Throws when a unit alone exceeds max_sequences or an
// index is out of range.
struct Step {
    std::int64_t first = 0, last = 0;
    std::int64_t first_unit = 0, unit_count = 0;
};
std::vector<Step> merge_into_steps(const std::vector<Unit>& units, const std::vector<std::int64_t>& unit_indices,
                                   std::int64_t max_sequences);

}  // namespace attnbatch::distributed
