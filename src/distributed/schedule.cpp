#include "attnbatch/distributed/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace attnbatch::distributed {

namespace {

RankStep step_of(const std::vector<Unit>& units, std::int64_t first_unit, std::int64_t count) {
    RankStep step;
    if (count == 0) return step;
    step.first_unit = first_unit;
    step.unit_count = count;
    const Unit& front = units[static_cast<std::size_t>(first_unit)];
    const Unit& back = units[static_cast<std::size_t>(first_unit + count - 1)];
    step.first = front.first;
    step.last = back.last;
    step.row_first = front.row_first;
    step.row_last = back.row_last;
    for (std::int64_t u = first_unit; u < first_unit + count; ++u) {
        const Unit& unit = units[static_cast<std::size_t>(u)];
        step.cost += unit.cost;
        step.key_rows = std::max(step.key_rows, unit.key_rows);
        step.sequences_done += unit.sequences_done();
    }
    return step;
}

// Whether a step of whole sequences that reached its cost at sequence `reached_at` goes on past
// `unit` to `next`: to the next chunk bound, within one chunk, so that its writes cover whole
// chunks (static and dynamic steps alike).
bool on_to_chunk_bound(const io::SequenceChunks& chunks, const Unit& unit, const Unit& next, std::int64_t reached_at) {
    return !unit.piece() && !next.piece() && !chunks.starts_at(next.first) && next.first - reached_at < chunks.every;
}

// Two units may share a step only when they continue each other (joins() in plan.hpp): a
// resumed run plans only the units not yet done, so neighbours in `units` need not be
// neighbours in the file; whole sequences and pieces never share a step.
// A share is contiguous when its units are adjacent; steps never span a gap.
std::vector<RankStep> split_share(const std::vector<Unit>& units, const std::vector<std::int64_t>& share,
                                  std::int64_t max_sequences, std::uint64_t max_bytes, int wanted, io::SequenceChunks chunks) {
    std::vector<RankStep> steps;
    if (share.empty()) return steps;
    double total = 0;
    for (std::int64_t u : share) total += units[static_cast<std::size_t>(u)].cost;
    const double target = total / std::max(1, wanted);
    std::int64_t sequences = 0;
    for (std::int64_t u : share) sequences += units[static_cast<std::size_t>(u)].last - units[static_cast<std::size_t>(u)].first;
    if (chunks.every * 4 > sequences / std::max(1, wanted)) chunks = io::SequenceChunks{};
    std::size_t begin = 0;
    double done = 0, in_step = 0;
    std::int64_t reached_at = -1;  // the sequence at which this step reached its share of the cost
    StepLoad load;
    for (std::size_t i = 0; i < share.size(); ++i) {
        const Unit& unit = units[static_cast<std::size_t>(share[i])];
        in_step += unit.cost;
        load.add(unit);
        const bool last = i + 1 == share.size();
        bool close = last;
        if (!last) {
            const Unit& next = units[static_cast<std::size_t>(share[i + 1])];
            const bool cannot_join = !joins(units, share[i], share[i + 1], load, max_sequences, max_bytes);
            // Close where the step's cost is nearest its share of the target.
            const double boundary = target * static_cast<double>(steps.size() + 1);
            const bool reached = done + in_step + 0.5 * next.cost >= boundary;
            // Costly units late in the share would leave too few units for `wanted` steps.
            const bool scarce = static_cast<std::int64_t>(share.size() - i - 1) <=
                                static_cast<std::int64_t>(wanted) - static_cast<std::int64_t>(steps.size()) - 1;
            if (reached && reached_at < 0) reached_at = next.first;
            const bool to_chunk_bound = reached && on_to_chunk_bound(chunks, unit, next, reached_at);
            close = cannot_join || scarce || (reached && !to_chunk_bound);
        }
        if (close) {
            steps.push_back(step_of(units, share[begin], static_cast<std::int64_t>(i + 1 - begin)));
            done += in_step;
            in_step = 0;
            load = StepLoad{};
            begin = i + 1;
            reached_at = -1;
        }
    }
    return steps;
}

// The fewest steps that keep every step within max_sequences and max_bytes.
int memory_steps(const std::vector<Unit>& units, const std::vector<std::int64_t>& share, std::int64_t max_sequences,
                 std::uint64_t max_bytes) {
    int steps = 0;
    StepLoad load;
    for (std::size_t i = 0; i < share.size(); ++i) {
        const Unit& unit = units[static_cast<std::size_t>(share[i])];
        if (i == 0 || !joins(units, share[i - 1], share[i], load, max_sequences, max_bytes)) {
            ++steps;
            load = StepLoad{};
        }
        load.add(unit);
    }
    return steps;
}

class StaticScheduler final : public Scheduler {
public:
    explicit StaticScheduler(std::vector<Round> rounds) : rounds_(std::move(rounds)) {}
    Round next(Comm& comm, double) override {
        if (next_ < rounds_.size()) return rounds_[next_++];
        return Round(static_cast<std::size_t>(comm.size()));
    }

private:
    std::vector<Round> rounds_;
    std::size_t next_ = 0;
};

class DynamicScheduler final : public Scheduler {
public:
    DynamicScheduler(const std::vector<Unit>& units, int ranks, std::int64_t max_sequences, int min_rounds,
                     double max_step_cost, std::uint64_t max_bytes, io::SequenceChunks chunks)
        : units_(units), ranks_(ranks), max_sequences_(max_sequences), min_rounds_(std::max(1, min_rounds)),
          max_step_cost_(max_step_cost), max_bytes_(max_bytes), chunks_(chunks) {
        for (const Unit& unit : units_) remaining_ += unit.cost;
        total_ = remaining_;
    }

    Round next(Comm& comm, double rate) override {
        // The requests: every rank's speed reaches rank 0, which decides the round.
        const std::vector<double> rates = comm.all_gather({rate});
        Round round(static_cast<std::size_t>(ranks_));
        if (comm.is_root()) round = decide(rates);
        comm.broadcast(round.data(), round.size() * sizeof(RankStep), 0);
        for (const RankStep& step : round) remaining_ -= step.cost;
        cursor_ = std::max(cursor_, end_of(round));
        return round;
    }

private:
    static std::int64_t end_of(const Round& round) {
        std::int64_t end = 0;
        for (const RankStep& step : round) end = std::max(end, step.first_unit + step.unit_count);
        return end;
    }

    Round decide(const std::vector<double>& rates) const {
        Round round(static_cast<std::size_t>(ranks_));
        const bool known = std::all_of(rates.begin(), rates.end(), [](double r) { return r > 0; });
        const double mean_rate = known ? std::accumulate(rates.begin(), rates.end(), 0.0) / ranks_ : 1.0;
        std::int64_t cursor = cursor_;
        const std::int64_t count = static_cast<std::int64_t>(units_.size());
        // Every rank's share of this round from the work remaining at its start: the ranks
        // compute their steps side by side, so a later rank must not get less for its place.
        const double share = std::min(remaining_ / (2.0 * ranks_), total_ / (static_cast<double>(ranks_) * min_rounds_));
        for (int r = 0; r < ranks_ && cursor < count; ++r) {
            const double speed = known ? rates[static_cast<std::size_t>(r)] / mean_rate : 1.0;
            double target = speed * share;
            if (max_step_cost_ > 0) target = std::min(target, max_step_cost_);
            std::int64_t taken = 0;
            StepLoad load;
            double cost = 0;
            std::int64_t reached_at = -1;  // the sequence at which this step reached its target
            while (cursor + taken < count) {
                const Unit& unit = units_[static_cast<std::size_t>(cursor + taken)];
                if (taken > 0) {
                    if (!joins(units_, cursor + taken - 1, cursor + taken, load, max_sequences_, max_bytes_)) break;
                    if (cost + 0.5 * unit.cost > target) {
                        if (reached_at < 0) reached_at = unit.first;
                        // Only where the step is at least four chunks long, as split_share has it.
                        const Unit& previous = units_[static_cast<std::size_t>(cursor + taken - 1)];
                        const bool long_enough = unit.first - units_[static_cast<std::size_t>(cursor)].first >= 4 * chunks_.every;
                        if (!long_enough || !on_to_chunk_bound(chunks_, previous, unit, reached_at)) break;
                    }
                }
                cost += unit.cost;
                load.add(unit);
                ++taken;
            }
            round[static_cast<std::size_t>(r)] = step_of(units_, cursor, taken);
            cursor += taken;
        }
        return round;
    }

    const std::vector<Unit>& units_;
    int ranks_;
    std::int64_t max_sequences_;
    int min_rounds_;
    double max_step_cost_;
    std::uint64_t max_bytes_;
    io::SequenceChunks chunks_;
    double total_ = 0, remaining_ = 0;
    std::int64_t cursor_ = 0;
};

}  // namespace

std::vector<Round> static_rounds(const std::vector<Unit>& units, const Plan& plan, std::int64_t max_sequences,
                                 int min_rounds, double max_step_cost, std::uint64_t max_bytes, io::SequenceChunks chunks) {
    const std::size_t ranks = plan.ranks.size();
    int wanted = 0;
    for (const RankShare& share : plan.ranks) {
        wanted = std::max(wanted, memory_steps(units, share.units, max_sequences, max_bytes));
    }
    std::size_t smallest_share = units.size();
    for (const RankShare& share : plan.ranks) {
        if (!share.units.empty()) smallest_share = std::min(smallest_share, share.units.size());
    }
    wanted = std::max(wanted, static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(std::max(1, min_rounds)), smallest_share)));
    if (max_step_cost > 0) {
        double costliest = 0;
        for (const RankShare& share : plan.ranks) costliest = std::max(costliest, share.cost);
        const double steps = std::min(std::ceil(costliest / max_step_cost), static_cast<double>(smallest_share));
        wanted = std::max(wanted, static_cast<int>(steps));
    }
    std::vector<std::vector<RankStep>> per_rank(ranks);
    std::size_t rounds = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
        per_rank[r] = split_share(units, plan.ranks[r].units, max_sequences, max_bytes, wanted, chunks);
        rounds = std::max(rounds, per_rank[r].size());
    }
    std::vector<Round> result(rounds, Round(ranks));
    for (std::size_t r = 0; r < ranks; ++r) {
        for (std::size_t k = 0; k < per_rank[r].size(); ++k) result[k][r] = per_rank[r][k];
    }
    return result;
}

std::unique_ptr<Scheduler> make_static_scheduler(std::vector<Round> rounds) {
    return std::make_unique<StaticScheduler>(std::move(rounds));
}

std::unique_ptr<Scheduler> make_dynamic_scheduler(const std::vector<Unit>& units, int ranks,
                                                  std::int64_t max_sequences, int min_rounds, double max_step_cost,
                                                  std::uint64_t max_bytes, io::SequenceChunks chunks) {
    return std::make_unique<DynamicScheduler>(units, ranks, max_sequences, min_rounds, max_step_cost, max_bytes, chunks);
}

}  // namespace attnbatch::distributed
