#include "attnbatch/distributed/plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace attnbatch::distributed {

double CostModel::sequence_flops(std::int64_t len) const {
    const double n = static_cast<double>(len);
    const double h = static_cast<double>(heads), dk = static_cast<double>(d_k), dv = static_cast<double>(d_v);
    const double pairs = causal ? n * (n + 1.0) / 2.0 : n * n;
    const double g = kv_heads > 0 ? static_cast<double>(kv_heads) : h;
    // Q, K and V widths: H heads of queries, G of keys and values.
    const double qkv_width = h * dk + g * (dk + dv);
    double flops = 2.0 * pairs * h * (dk + dv);
    if (d_in > 0) flops += 2.0 * n * static_cast<double>(d_in) * qkv_width;
    if (d_out > 0) flops += 2.0 * n * h * dv * static_cast<double>(d_out);
    // Data moved: the inputs as read, the output and the log-sum-exp rows as written.
    const double in_width = d_in > 0 ? static_cast<double>(d_in) : qkv_width;
    const double out_width = (d_out > 0 ? static_cast<double>(d_out) : h * dv) + h;
    flops += (n + static_cast<double>(kSequenceOverheadTokens)) * (in_width + out_width) + 1.0;
    return flops;
}

std::vector<Unit> units_with_bounds(const std::vector<std::int32_t>& lengths, const CostModel& model,
                                    const std::vector<std::int64_t>& bounds) {
    std::vector<Unit> units;
    for (std::size_t u = 0; u + 1 < bounds.size(); ++u) {
        Unit unit{bounds[u], bounds[u + 1], 0.0, 0};
        if (unit.first < 0 || unit.last <= unit.first || unit.last > static_cast<std::int64_t>(lengths.size())) {
            throw std::invalid_argument("units_with_bounds: bounds must rise from 0 to N");
        }
        for (std::int64_t i = unit.first; i < unit.last; ++i) {
            const std::int32_t len = lengths[static_cast<std::size_t>(i)];
            unit.cost += model.sequence_flops(len);
            unit.tokens += len;
        }
        units.push_back(unit);
    }
    return units;
}

std::vector<Unit> form_units(const std::vector<std::int32_t>& lengths, const CostModel& model,
                             std::int64_t max_sequences) {
    if (max_sequences < 1) {
        throw std::invalid_argument("form_units: max_sequences must be at least 1, got " + std::to_string(max_sequences));
    }
    std::vector<Unit> units;
    if (lengths.empty()) return units;

    // First pass: the total and the costliest sequence, which set the cap. The costs are
    // recomputed in the second pass rather than stored: same arithmetic, same values.
    double total = 0, costliest = 0;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
        if (lengths[i] < 0) {
            throw std::invalid_argument("form_units: lengths[" + std::to_string(i) + "] = " +
                                        std::to_string(lengths[i]) + " is negative");
        }
        const double c = model.sequence_flops(lengths[i]);
        total += c;
        costliest = std::max(costliest, c);
    }
    const double cap = std::max(total / static_cast<double>(kPlanGranularity), costliest);

    const auto n = static_cast<std::int64_t>(lengths.size());
    units.reserve(static_cast<std::size_t>(
        std::min<std::int64_t>(n, 2 * kPlanGranularity + n / max_sequences + 2)));
    // A unit closes before the sequence that would take it past the cap (the cap is at least
    // any one sequence, so every sequence fits in a unit of its own) or when it is full.
    Unit unit;
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int32_t len = lengths[static_cast<std::size_t>(i)];
        const double cost = model.sequence_flops(len);
        if (unit.last > unit.first && unit.cost + cost > cap) {
            units.push_back(unit);
            unit = Unit{i, i, 0.0, 0};
        }
        unit.cost += cost;
        unit.tokens += len;
        unit.last = i + 1;
        if (unit.last - unit.first == max_sequences) {
            units.push_back(unit);
            unit = Unit{i + 1, i + 1, 0.0, 0};
        }
    }
    if (unit.last > unit.first) units.push_back(unit);
    return units;
}

namespace {

void check_units(const std::vector<Unit>& units, int ranks, const char* who) {
    if (ranks < 1) throw std::invalid_argument(std::string(who) + ": ranks must be at least 1, got " + std::to_string(ranks));
    for (std::size_t u = 0; u < units.size(); ++u) {
        if (!(units[u].cost >= 0) || !std::isfinite(units[u].cost)) {
            throw std::invalid_argument(std::string(who) + ": unit " + std::to_string(u) +
                                        " has a negative or non-finite cost");
        }
    }
}

void set_imbalance(Plan& plan) {
    double total = 0, highest = 0;
    for (const RankShare& share : plan.ranks) {
        total += share.cost;
        highest = std::max(highest, share.cost);
    }
    const double mean = total / static_cast<double>(plan.ranks.size());
    plan.imbalance = total > 0 ? highest / mean - 1.0 : 0.0;
}

void add_unit(RankShare& share, const Unit& unit, std::int64_t u) {
    share.units.push_back(u);
    share.cost += unit.cost;
    share.sequences += unit.last - unit.first;
    share.tokens += unit.tokens;
}

// Shares from an owner per unit, in one pass over the units in order: each rank's list
// comes out ascending and its sums are taken in ascending unit order.
Plan plan_from_owners(const std::vector<Unit>& units, const std::vector<int>& owner, int ranks) {
    Plan plan;
    plan.ranks.resize(static_cast<std::size_t>(ranks));
    std::vector<std::int64_t> counts(static_cast<std::size_t>(ranks), 0);
    for (const int r : owner) ++counts[static_cast<std::size_t>(r)];
    for (std::size_t r = 0; r < counts.size(); ++r) plan.ranks[r].units.reserve(static_cast<std::size_t>(counts[r]));
    for (std::size_t u = 0; u < owner.size(); ++u) {
        add_unit(plan.ranks[static_cast<std::size_t>(owner[u])], units[u], static_cast<std::int64_t>(u));
    }
    set_imbalance(plan);
    return plan;
}

// The least loaded rank, the lowest among equals: a tournament tree over the ranks (leaves
// padded to a power of two with ranks that never win), each inner node holding the winner of
// its two children. Charging the winner replays its path to the root: log2 P comparisons.
class LoadTree {
public:
    explicit LoadTree(int ranks) {
        while (leaves_ < static_cast<std::size_t>(ranks)) leaves_ *= 2;
        load_.assign(leaves_, std::numeric_limits<double>::infinity());
        std::fill(load_.begin(), load_.begin() + ranks, 0.0);
        winner_.assign(2 * leaves_, 0);
        for (std::size_t i = 0; i < leaves_; ++i) winner_[leaves_ + i] = static_cast<std::uint32_t>(i);
        for (std::size_t node = leaves_; node-- > 1;) winner_[node] = play(winner_[2 * node], winner_[2 * node + 1]);
    }
    int top_rank() const { return static_cast<int>(winner_[1]); }
    // Adds `cost` to the top rank's load.
    void charge_top(double cost) {
        const std::uint32_t rank = winner_[1];
        load_[rank] += cost;
        for (std::size_t node = (leaves_ + rank) / 2; node >= 1; node /= 2) {
            winner_[node] = play(winner_[2 * node], winner_[2 * node + 1]);
        }
    }

private:
    // The left child's ranks are all lower than the right child's: ties go left.
    std::uint32_t play(std::uint32_t left, std::uint32_t right) const {
        return load_[right] < load_[left] ? right : left;
    }
    std::size_t leaves_ = 1;
    std::vector<double> load_;
    std::vector<std::uint32_t> winner_;
};

// Unit indices by cost, costliest first, the lower index first among equal costs: a stable
// LSD radix sort on the bits of the (non-negative) costs, whose order as integers is the
// order of the values.
std::vector<std::int64_t> by_cost_descending(const std::vector<Unit>& units) {
    struct Entry {
        std::uint64_t key;  // ~bits: ascending keys are descending costs
        std::int64_t unit;
    };
    std::vector<Entry> entries(units.size()), scratch(units.size());
    for (std::size_t u = 0; u < units.size(); ++u) {
        const double cost = units[u].cost == 0 ? 0.0 : units[u].cost;  // -0 as +0
        std::uint64_t bits;
        std::memcpy(&bits, &cost, sizeof bits);
        entries[u] = {~bits, static_cast<std::int64_t>(u)};
    }
    constexpr int kDigitBits = 11;
    constexpr std::size_t kBuckets = std::size_t{1} << kDigitBits;
    std::vector<std::size_t> offsets(kBuckets);
    for (int shift = 0; shift < 64; shift += kDigitBits) {
        std::fill(offsets.begin(), offsets.end(), 0);
        for (const Entry& e : entries) ++offsets[(e.key >> shift) & (kBuckets - 1)];
        if (std::find(offsets.begin(), offsets.end(), entries.size()) != offsets.end()) continue;  // one bucket
        std::size_t sum = 0;
        for (std::size_t& o : offsets) sum += std::exchange(o, sum);
        for (const Entry& e : entries) scratch[offsets[(e.key >> shift) & (kBuckets - 1)]++] = e;
        entries.swap(scratch);
    }
    std::vector<std::int64_t> order(units.size());
    for (std::size_t i = 0; i < entries.size(); ++i) order[i] = entries[i].unit;
    return order;
}

// Contiguous runs of units over cost prefix sums. The cost of units [i, j) is taken as
// prefix[j] - prefix[i] everywhere, one expression, so that every decision below agrees.
class PrefixCosts {
public:
    explicit PrefixCosts(const std::vector<Unit>& units) : prefix_(units.size() + 1, 0.0) {
        for (std::size_t u = 0; u < units.size(); ++u) prefix_[u + 1] = prefix_[u] + units[u].cost;
    }
    std::size_t count() const { return prefix_.size() - 1; }
    double total() const { return prefix_.back(); }
    // The furthest j >= i with cost [i, j) <= bound.
    std::size_t reach_forward(std::size_t i, double bound) const {
        const auto it = std::partition_point(prefix_.begin() + static_cast<std::ptrdiff_t>(i), prefix_.end(),
                                             [&](double p) { return p - prefix_[i] <= bound; });
        return static_cast<std::size_t>(it - prefix_.begin()) - 1;
    }
    // The nearest i <= j with cost [i, j) <= bound.
    std::size_t reach_backward(std::size_t j, double bound) const {
        const auto it = std::partition_point(prefix_.begin(), prefix_.begin() + static_cast<std::ptrdiff_t>(j) + 1,
                                             [&](double p) { return prefix_[j] - p > bound; });
        return static_cast<std::size_t>(it - prefix_.begin());
    }
    // Whether `ranks` contiguous runs of cost <= bound each cover all units (greedy).
    bool feasible(int ranks, double bound) const {
        std::size_t i = 0;
        for (int r = 0; r < ranks && i < count(); ++r) i = reach_forward(i, bound);
        return i == count();
    }
    // The unit boundary nearest to a cost target at or after `from` (the lower on a tie).
    std::size_t nearest(std::size_t from, double target) const {
        std::size_t b = static_cast<std::size_t>(
            std::lower_bound(prefix_.begin() + static_cast<std::ptrdiff_t>(from), prefix_.end(), target) -
            prefix_.begin());
        if (b > count()) b = count();
        if (b > from && target - prefix_[b - 1] <= prefix_[b] - target) --b;
        return b;
    }

private:
    std::vector<double> prefix_;
};

// The boundaries between ranks: first the smallest bottleneck B (the costliest run) that
// `ranks` contiguous runs can achieve, by bisection over greedy covers; then each boundary
// as near to r/P of the total cost as the bottleneck allows, so that ranks are also even
// below the costliest one rather than packed to B from the left.
std::vector<std::size_t> contiguous_bounds(const PrefixCosts& costs, int ranks) {
    const std::size_t count = costs.count();
    const auto p = static_cast<std::size_t>(ranks);
    std::vector<std::size_t> bounds(p + 1, 0);
    bounds[p] = count;
    if (!(costs.total() > 0)) {
        // Nothing costs anything: share the units by count.
        for (std::size_t r = 1; r < p; ++r) bounds[r] = static_cast<std::size_t>(
            static_cast<unsigned long long>(count) * r / p);
        return bounds;
    }
    double low = 0, high = costs.total();  // low infeasible (total > 0), high feasible
    for (int iteration = 0; iteration < 200; ++iteration) {
        const double mid = low + (high - low) / 2;
        if (!(mid > low && mid < high)) break;
        (costs.feasible(ranks, mid) ? high : low) = mid;
    }
    const double bound = high;
    // earliest[r]: the earliest first unit of rank r from which ranks r..P-1 can still
    // cover the rest within the bound.
    std::vector<std::size_t> earliest(p + 1, count);
    for (std::size_t r = p; r-- > 1;) earliest[r] = costs.reach_backward(earliest[r + 1], bound);
    for (std::size_t r = 1; r < p; ++r) {
        const std::size_t previous = bounds[r - 1];
        const double target = costs.total() * (static_cast<double>(r) / static_cast<double>(ranks));
        const std::size_t lowest = std::max(earliest[r], previous);
        const std::size_t highest = std::max(costs.reach_forward(previous, bound), lowest);
        bounds[r] = std::clamp(costs.nearest(previous, target), lowest, highest);
    }
    return bounds;
}

Plan plan_contiguous(const std::vector<Unit>& units, int ranks) {
    const std::vector<std::size_t> bounds = contiguous_bounds(PrefixCosts(units), ranks);
    Plan plan;
    plan.ranks.resize(static_cast<std::size_t>(ranks));
    for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
        plan.ranks[r].units.reserve(bounds[r + 1] - bounds[r]);
        for (std::size_t u = bounds[r]; u < bounds[r + 1]; ++u) add_unit(plan.ranks[r], units[u], static_cast<std::int64_t>(u));
    }
    set_imbalance(plan);
    return plan;
}

Plan plan_lpt(const std::vector<Unit>& units, int ranks) {
    std::vector<int> owner(units.size(), 0);
    LoadTree loads(ranks);
    for (const std::int64_t u : by_cost_descending(units)) {
        owner[static_cast<std::size_t>(u)] = loads.top_rank();
        loads.charge_top(units[static_cast<std::size_t>(u)].cost);
    }
    return plan_from_owners(units, owner, ranks);
}

}  // namespace

Plan plan_static(const std::vector<Unit>& units, int ranks, StaticStrategy strategy) {
    check_units(units, ranks, "plan_static");
    return strategy == StaticStrategy::contiguous ? plan_contiguous(units, ranks) : plan_lpt(units, ranks);
}

Plan simulate_dynamic(const std::vector<Unit>& units, int ranks) {
    check_units(units, ranks, "simulate_dynamic");
    std::vector<int> owner(units.size(), 0);
    LoadTree finish(ranks);  // the time each rank becomes free
    for (std::size_t u = 0; u < units.size(); ++u) {
        owner[u] = finish.top_rank();
        finish.charge_top(units[u].cost);
    }
    return plan_from_owners(units, owner, ranks);
}

std::vector<Step> merge_into_steps(const std::vector<Unit>& units, const std::vector<std::int64_t>& unit_indices,
                                   std::int64_t max_sequences) {
    if (max_sequences < 1) {
        throw std::invalid_argument("merge_into_steps: max_sequences must be at least 1, got " +
                                    std::to_string(max_sequences));
    }
    std::vector<Step> steps;
    const auto count = static_cast<std::int64_t>(units.size());
    for (const std::int64_t u : unit_indices) {
        if (u < 0 || u >= count) {
            throw std::invalid_argument("merge_into_steps: unit index " + std::to_string(u) + " is outside [0, " +
                                        std::to_string(count) + ")");
        }
        const Unit& unit = units[static_cast<std::size_t>(u)];
        if (unit.last - unit.first > max_sequences) {
            throw std::invalid_argument("merge_into_steps: unit " + std::to_string(u) + " holds " +
                                        std::to_string(unit.last - unit.first) + " sequences, more than " +
                                        std::to_string(max_sequences));
        }
        if (!steps.empty()) {
            Step& step = steps.back();
            if (u == step.first_unit + step.unit_count && unit.first == step.last &&
                unit.last - step.first <= max_sequences) {
                step.last = unit.last;
                ++step.unit_count;
                continue;
            }
        }
        steps.push_back(Step{unit.first, unit.last, u, 1});
    }
    return steps;
}

}  // namespace attnbatch::distributed
