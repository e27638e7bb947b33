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
    const double g = key_value_heads();
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

double CostModel::piece_flops(std::int64_t len, std::int64_t row_first, std::int64_t row_last, std::int64_t key_rows,
                               std::int64_t keys_projected) const {
    const double n = static_cast<double>(len);
    const double q0 = static_cast<double>(std::clamp<std::int64_t>(row_first, 0, len));
    const double q1 = static_cast<double>(std::clamp<std::int64_t>(row_last, row_first, len));
    const double keys = static_cast<double>(key_rows), rows = q1 - q0;
    const double h = static_cast<double>(heads), dk = static_cast<double>(d_k), dv = static_cast<double>(d_v);
    const double pairs = causal ? (q1 * (q1 + 1.0) - q0 * (q0 + 1.0)) / 2.0 : rows * n;
    double flops = 2.0 * pairs * h * (dk + dv);
    if (d_in > 0) {
        const double new_keys = std::max(0.0, keys - static_cast<double>(keys_projected));
        flops += 2.0 * static_cast<double>(d_in) * (rows * h * dk + new_keys * key_value_heads() * (dk + dv));
    }
    if (d_out > 0) flops += 2.0 * rows * h * dv * static_cast<double>(d_out);
    // Read: the keys and values (with the embeddings they hold the queries too) and, for
    // Q/K/V input, the queries; written: the rows' output and lse.
    const double in_width = d_in > 0 ? static_cast<double>(d_in) : h * (dk + dv);
    const double query_width = d_in > 0 ? 0.0 : h * dk;
    const double out_width = (d_out > 0 ? static_cast<double>(d_out) : h * dv) + h;
    const double overhead = static_cast<double>(kSequenceOverheadTokens);
    flops += (keys + overhead) * in_width + (rows + overhead) * (query_width + out_width) + 1.0;
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
    return form_units(lengths, model, max_sequences, SplitOptions{});
}

namespace {

// The rows a sequence has in the output: all L of them in the padded layout, its tokens in
// the packed one.
std::int64_t rows_of(const SplitOptions& split, std::int32_t len) {
    return split.padded_rows > 0 ? split.padded_rows : len;
}

std::int64_t key_rows_of(const CostModel& model, std::int32_t len, std::int64_t row_last) {
    return model.causal ? std::min<std::int64_t>(row_last, len) : len;
}

Unit make_piece(const CostModel& model, const SplitOptions& split, std::int64_t sequence, std::int32_t len,
                std::int64_t row_first, std::int64_t row_last) {
    Unit piece;
    piece.first = sequence;
    piece.last = sequence + 1;
    piece.row_first = row_first;
    piece.row_last = row_last;
    piece.key_rows = key_rows_of(model, len, row_last);
    // The piece before (rows up to row_first) left its keys projected on the rank that runs
    // both, as consecutive units of a share do (StepComputer carries them from step to step).
    const std::int64_t keys_before = row_first > 0 ? key_rows_of(model, len, row_first) : 0;
    piece.cost = model.piece_flops(len, row_first, row_last, piece.key_rows, keys_before);
    piece.tokens = std::max<std::int64_t>(0, std::min<std::int64_t>(row_last, len) - row_first);
    piece.ends_sequence = row_last == rows_of(split, len);
    piece.bytes = split.memory.bytes(sequence, row_last - row_first, piece.key_rows);
    piece.shared_bytes = static_cast<std::uint64_t>(piece.key_rows) * split.memory.key_row;
    return piece;
}

// The smallest row r with pairs(r) >= target, pairs(r) the attention pairs of rows [0, r) of a
// sequence of `len` keys.
std::int64_t row_reaching(const CostModel& model, std::int32_t len, double target) {
    if (target <= 0) return 0;
    if (!model.causal) return std::min<std::int64_t>(len, static_cast<std::int64_t>(std::ceil(target / len)));
    // r (r + 1) / 2 >= target
    auto r = static_cast<std::int64_t>(std::ceil((std::sqrt(1.0 + 8.0 * target) - 1.0) / 2.0));
    while (r > 0 && static_cast<double>(r - 1) * static_cast<double>(r) / 2.0 >= target) --r;
    return std::min<std::int64_t>(len, r);
}

// Cuts of sequence `sequence` into pieces: `count` pieces of about equal attention pairs, their
// bounds on multiples of kPieceRows, then any piece longer than `max_rows` cut into equal
// slabs of at most max_rows rows. Returns the bounds, from 0 to the sequence's rows.
std::vector<std::int64_t> piece_bounds(const CostModel& model, std::int32_t len, std::int64_t rows, std::int64_t count,
                                       std::int64_t max_rows) {
    std::vector<std::int64_t> bounds{0};
    const double n = static_cast<double>(len);
    const double all_pairs = model.causal ? n * (n + 1.0) / 2.0 : n * n;
    for (std::int64_t j = 1; j < count; ++j) {
        const std::int64_t exact = row_reaching(model, len, all_pairs * static_cast<double>(j) / static_cast<double>(count));
        const std::int64_t cut = (exact + kPieceRows / 2) / kPieceRows * kPieceRows;
        if (cut >= bounds.back() + kPieceRows && cut + kPieceRows <= len) bounds.push_back(cut);
    }
    bounds.push_back(rows);
    if (max_rows <= 0 || max_rows >= rows) return bounds;
    std::vector<std::int64_t> slabs{0};
    for (std::size_t i = 1; i < bounds.size(); ++i) {
        const std::int64_t begin = bounds[i - 1], span = bounds[i] - begin;
        const std::int64_t parts = (span + max_rows - 1) / max_rows;
        for (std::int64_t k = 1; k < parts; ++k) {
            std::int64_t cut = begin + span * k / parts;
            if (max_rows >= kPieceRows) cut = cut / kPieceRows * kPieceRows;
            // Aligning down must not leave the slab before it over max_rows.
            if (cut - slabs.back() > max_rows) cut = slabs.back() + max_rows;
            if (cut > slabs.back()) slabs.push_back(cut);
        }
        while (bounds[i] - slabs.back() > max_rows) slabs.push_back(slabs.back() + max_rows);
        slabs.push_back(bounds[i]);
    }
    return slabs;
}

}  // namespace

std::vector<Unit> form_units(const std::vector<std::int32_t>& lengths, const CostModel& model,
                             std::int64_t max_sequences, const SplitOptions& split) {
    if (max_sequences < 1) {
        throw std::invalid_argument("form_units: max_sequences must be at least 1, got " + std::to_string(max_sequences));
    }
    if (split.ranks < 1) throw std::invalid_argument("form_units: ranks must be at least 1, got " + std::to_string(split.ranks));
    std::vector<Unit> units;
    if (lengths.empty()) return units;
    const RowMemory& memory = split.memory;
    const auto whole_bytes = [&](std::int64_t s, std::int32_t len) {
        const std::int64_t rows = rows_of(split, len);
        return memory.bytes(s, rows, rows);
    };

    double total = 0;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
        if (lengths[i] < 0) {
            throw std::invalid_argument("form_units: lengths[" + std::to_string(i) + "] = " +
                                        std::to_string(lengths[i]) + " is negative");
        }
        total += model.sequence_flops(lengths[i]);
    }
    double piece_cap = std::numeric_limits<double>::infinity();
    if (split.ranks > 1) piece_cap = total / (static_cast<double>(split.ranks) * static_cast<double>(kPiecesPerRank));
    if (split.max_piece_cost > 0) piece_cap = std::min(piece_cap, split.max_piece_cost);
    // The cuts of sequence s, or none (fewer than two pieces) when it stays whole.
    const auto cuts = [&](std::int64_t s, std::int32_t len, double cost) -> std::vector<std::int64_t> {
        const bool balance = cost > piece_cap && len >= 2 * kPieceRows;
        const bool memory_bound = memory.budget > 0 && whole_bytes(s, len) > memory.budget;
        if (!balance && !memory_bound) return {};
        const std::int64_t rows = rows_of(split, len);
        std::int64_t count = 1;
        if (balance) count = std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(cost / piece_cap)), len / kPieceRows);
        std::int64_t max_rows = 0;
        if (memory_bound) {
            const std::uint64_t keys = static_cast<std::uint64_t>(len) * memory.key_row;
            const std::uint64_t per_row = std::max<std::uint64_t>(memory.row_bytes(s), 1);
            max_rows = keys < memory.budget ? static_cast<std::int64_t>((memory.budget - keys) / per_row) : 1;
            max_rows = std::clamp<std::int64_t>(max_rows, 1, rows);
        }
        std::vector<std::int64_t> bounds = piece_bounds(model, len, rows, count, max_rows);
        if (bounds.size() <= 2) bounds.clear();
        return bounds;
    };
    double costliest = 0;
    const auto n = static_cast<std::int64_t>(lengths.size());
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int32_t len = lengths[static_cast<std::size_t>(i)];
        const double cost = model.sequence_flops(len);
        if (cost <= costliest) continue;  // only a costlier one can raise the cap
        if (cuts(i, len, cost).empty()) costliest = cost;
    }
    const double cap = std::max(total / static_cast<double>(kPlanGranularity), costliest);

    units.reserve(static_cast<std::size_t>(
        std::min<std::int64_t>(n, 2 * kPlanGranularity + n / max_sequences + 2)));
    Unit unit;
    const auto close = [&](std::int64_t next) {
        if (unit.last > unit.first) units.push_back(unit);
        unit = Unit{next, next, 0.0, 0};
    };
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int32_t len = lengths[static_cast<std::size_t>(i)];
        const double cost = model.sequence_flops(len);
        const std::vector<std::int64_t> bounds = cost > cap || memory.budget > 0 ? cuts(i, len, cost) : std::vector<std::int64_t>{};
        if (!bounds.empty()) {
            close(i);
            for (std::size_t b = 0; b + 1 < bounds.size(); ++b) units.push_back(make_piece(model, split, i, len, bounds[b], bounds[b + 1]));
            unit = Unit{i + 1, i + 1, 0.0, 0};
            continue;
        }
        const std::uint64_t bytes = memory.query_row > 0 ? whole_bytes(i, len) : 0;
        if (unit.last > unit.first &&
            (unit.cost + cost > cap || (memory.budget > 0 && unit.bytes + bytes > memory.budget))) {
            close(i);
        }
        unit.cost += cost;
        unit.tokens += len;
        unit.bytes += bytes;
        unit.last = i + 1;
        if (unit.last - unit.first == max_sequences) close(i + 1);
    }
    close(n);
    return units;
}

std::vector<Unit> units_with_positions(const std::vector<std::int32_t>& lengths, const CostModel& model,
                                       const std::vector<std::int64_t>& bounds, const std::vector<std::int64_t>& rows,
                                       const SplitOptions& split) {
    if (!rows.empty() && rows.size() != bounds.size()) {
        throw std::invalid_argument("units_with_positions: " + std::to_string(rows.size()) + " rows for " +
                                    std::to_string(bounds.size()) + " bounds");
    }
    const auto n = static_cast<std::int64_t>(lengths.size());
    const auto row_at = [&](std::size_t u) { return rows.empty() ? 0 : rows[u]; };
    const auto bad = [](const std::string& why) {
        return std::invalid_argument("units_with_positions: " + why);
    };
    if (bounds.size() < 2 || bounds.front() != 0 || row_at(0) != 0 || bounds.back() != n || row_at(bounds.size() - 1) != 0) {
        throw bad("positions must rise from (0, 0) to (N, 0)");
    }
    std::vector<Unit> units;
    units.reserve(bounds.size() - 1);
    for (std::size_t u = 0; u + 1 < bounds.size(); ++u) {
        const std::int64_t s = bounds[u], r = row_at(u), next_s = bounds[u + 1], next_r = row_at(u + 1);
        if (s < 0 || s >= n) throw bad("unit " + std::to_string(u) + " starts outside the sequences");
        if (r == 0 && next_r == 0) {
            if (next_s <= s) throw bad("unit " + std::to_string(u) + " is empty");
            Unit unit{s, next_s, 0.0, 0};
            for (std::int64_t i = s; i < next_s; ++i) {
                const std::int32_t len = lengths[static_cast<std::size_t>(i)];
                unit.cost += model.sequence_flops(len);
                unit.tokens += len;
                if (split.memory.query_row > 0) unit.bytes += split.memory.bytes(i, rows_of(split, len), rows_of(split, len));
            }
            units.push_back(unit);
            continue;
        }
        const std::int32_t len = lengths[static_cast<std::size_t>(s)];
        const std::int64_t all = rows_of(split, len);
        const std::int64_t end = next_s == s ? next_r : next_s == s + 1 && next_r == 0 ? all : -1;
        if (r < 0 || end <= r || end > all) {
            throw bad("unit " + std::to_string(u) + " is not a row range of sequence " + std::to_string(s));
        }
        units.push_back(make_piece(model, split, s, len, r, end));
    }
    return units;
}

std::vector<std::int64_t> unit_bounds_of(const std::vector<Unit>& units) {
    std::vector<std::int64_t> bounds{0};
    for (const Unit& unit : units) bounds.push_back(unit.piece() && !unit.ends_sequence ? unit.first : unit.last);
    return bounds;
}

std::vector<std::int64_t> unit_rows_of(const std::vector<Unit>& units) {
    const bool any = std::any_of(units.begin(), units.end(), [](const Unit& unit) { return unit.piece(); });
    if (!any) return {};
    std::vector<std::int64_t> rows{0};
    for (const Unit& unit : units) rows.push_back(unit.piece() && !unit.ends_sequence ? unit.row_last : 0);
    return rows;
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

void StepLoad::add(const Unit& unit) noexcept {
    if (unit.piece()) {
        bytes = bytes - shared + unit.bytes;
        shared = unit.shared_bytes;
        return;
    }
    sequences += unit.last - unit.first;
    bytes += unit.bytes;
    shared = 0;
}

bool joins(const std::vector<Unit>& units, std::int64_t previous, std::int64_t next, const StepLoad& load,
           std::int64_t max_sequences, std::uint64_t max_bytes) {
    if (next != previous + 1) return false;
    const Unit& a = units[static_cast<std::size_t>(previous)];
    const Unit& b = units[static_cast<std::size_t>(next)];
    if (a.piece() != b.piece()) return false;
    if (b.piece()) {
        if (a.first != b.first || a.row_last != b.row_first) return false;
        return max_bytes == 0 || load.bytes - load.shared + b.bytes <= max_bytes;
    }
    if (a.last != b.first || load.sequences + (b.last - b.first) > max_sequences) return false;
    return max_bytes == 0 || load.bytes + b.bytes <= max_bytes;
}

std::vector<Step> merge_into_steps(const std::vector<Unit>& units, const std::vector<std::int64_t>& unit_indices,
                                   std::int64_t max_sequences, std::uint64_t max_bytes) {
    if (max_sequences < 1) {
        throw std::invalid_argument("merge_into_steps: max_sequences must be at least 1, got " +
                                    std::to_string(max_sequences));
    }
    std::vector<Step> steps;
    StepLoad load;
    const auto count = static_cast<std::int64_t>(units.size());
    for (const std::int64_t u : unit_indices) {
        if (u < 0 || u >= count) {
            throw std::invalid_argument("merge_into_steps: unit index " + std::to_string(u) + " is outside [0, " +
                                        std::to_string(count) + ")");
        }
        const Unit& unit = units[static_cast<std::size_t>(u)];
        if (!unit.piece() && unit.last - unit.first > max_sequences) {
            throw std::invalid_argument("merge_into_steps: unit " + std::to_string(u) + " holds " +
                                        std::to_string(unit.last - unit.first) + " sequences, more than " +
                                        std::to_string(max_sequences));
        }
        if (max_bytes > 0 && unit.bytes > max_bytes) {
            throw std::invalid_argument("merge_into_steps: unit " + std::to_string(u) + " takes " +
                                        std::to_string(unit.bytes) + " bytes, more than " + std::to_string(max_bytes));
        }
        if (!steps.empty()) {
            Step& step = steps.back();
            if (joins(units, step.first_unit + step.unit_count - 1, u, load, max_sequences, max_bytes)) {
                step.last = unit.last;
                step.row_last = unit.row_last;
                ++step.unit_count;
                load.add(unit);
                continue;
            }
        }
        steps.push_back(Step{unit.first, unit.last, u, 1, unit.row_first, unit.row_last});
        load = StepLoad{};
        load.add(unit);
    }
    return steps;
}

}  // namespace attnbatch::distributed
