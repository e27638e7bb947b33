// Runs proceed in rounds: in each round every rank computes at most one step (a run of
// consecutive units), while its main thread writes the previous round and reads the next.
// Collective HDF5 writes and the per-round agreement (errors, signals) need every rank in
// the same round, so the schedules below hand out work round by round.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "attnbatch/distributed/comm.hpp"
#include "attnbatch/distributed/plan.hpp"
#include "attnbatch/io/output/output_layout.hpp"

namespace attnbatch::distributed {

struct RankStep {
    std::int64_t first = 0, last = 0;            // sequences [first, last)
    std::int64_t first_unit = 0, unit_count = 0;  // units of the plan
    double cost = 0;
    // Pieces (plan.hpp): query rows [row_first, row_last) of sequence `first`, reading its first
    // key_rows keys and values; row_last = 0 for whole sequences.
    std::int64_t row_first = 0, row_last = 0, key_rows = 0;
    std::int64_t sequences_done = 0;  // sequences this step finishes
    bool empty() const noexcept { return unit_count == 0; }
    bool piece() const noexcept { return row_last > 0; }
};

using Round = std::vector<RankStep>;  // one step per rank, possibly empty

inline bool round_is_empty(const Round& round) {
    for (const RankStep& step : round) {
        if (!step.empty()) return false;
    }
    return true;
}

// Static: each rank's contiguous share cut into steps of similar cost (so that ranks reach
// each round's collective write together), at least min(`min_rounds`, units of the smallest
// non-empty share) steps for every rank (rounds are collective: a rank whose share is one
// costly unit must not make the others run extra small rounds), never more than `max_sequences` sequences per step.
// `max_step_cost` > 0 also bounds a step's cost (so that a signal is answered within about
// one step's compute); a unit costlier than it is a step of its own. `max_bytes` > 0 bounds
// a step's data (joins() in plan.hpp). A step of whole sequences that has reached its share
// of the cost goes on to the next of the output's chunk bounds (`chunks`,
// io::sequence_chunks) when one comes within a chunk and the other bounds allow, so that its
// writes cover whole chunks; only where steps are at least four chunks long, so that this
// moves a step's cost by a quarter at most.
std::vector<Round> static_rounds(const std::vector<Unit>& units, const Plan& plan, std::int64_t max_sequences,
                                 int min_rounds, double max_step_cost = 0, std::uint64_t max_bytes = 0,
                                 io::SequenceChunks chunks = {});

class Scheduler {
public:
    virtual ~Scheduler() = default;
    // Collective. The steps of every rank for the next round; all empty once the work is
    // handed out. `rate` is this rank's measured compute speed (cost per second) so far,
    // 0 when not known yet.
    virtual Round next(Comm& comm, double rate) = 0;
};

std::unique_ptr<Scheduler> make_static_scheduler(std::vector<Round> rounds);

// Dynamic: rank 0 hands out runs of units in order, each rank's run sized by its measured
// speed (guided self-scheduling: half of the remaining work spread over the ranks, at most
// 1/(ranks*min_rounds) of the total per rank and round, at most max_sequences sequences). A run
// of whole sequences past its size goes on to a bound of `chunks` within one chunk, as static
// steps do.
std::unique_ptr<Scheduler> make_dynamic_scheduler(const std::vector<Unit>& units, int ranks,
                                                  std::int64_t max_sequences, int min_rounds, double max_step_cost = 0,
                                                  std::uint64_t max_bytes = 0, io::SequenceChunks chunks = {});

}  // namespace attnbatch::distributed
