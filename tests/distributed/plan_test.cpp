// Properties of the work planner: units, static shares (contiguous, LPT), the dynamic
// simulation and the I/O steps, on hand-made and random cases, and the 2% balance of the
// contiguous split at 10^7 Zipf lengths and 4096 ranks.
#include "attnbatch/distributed/plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "support/length_distributions.hpp"

namespace attnbatch::distributed {
namespace {

using testing::pareto_lengths;
using testing::uniform_lengths;
using testing::zipf_lengths;

CostModel attention_only() {
    CostModel m;
    m.heads = 1;
    m.d_k = m.d_v = 64;
    return m;
}

CostModel projected() {
    CostModel m;
    m.heads = 4;
    m.d_k = m.d_v = 16;
    m.d_in = 64;
    m.d_out = 32;
    m.causal = true;
    return m;
}

const std::vector<StaticStrategy> kStrategies = {StaticStrategy::contiguous, StaticStrategy::lpt};

Plan make_plan(const std::vector<Unit>& units, int ranks, int which) {
    // 0, 1: the static strategies; 2: the dynamic simulation.
    if (which == 2) return simulate_dynamic(units, ranks);
    return plan_static(units, ranks, kStrategies[static_cast<std::size_t>(which)]);
}

// Units cover 0..N-1 once, in order, none empty, none above max_sequences; their costs and
// tokens are the sums over their sequences; every unit but the last closed by the rule (and
// not earlier than the rule says).
void expect_valid_units(const std::vector<std::int32_t>& lengths, const CostModel& model, std::int64_t max_sequences,
                        const std::vector<Unit>& units) {
    const auto n = static_cast<std::int64_t>(lengths.size());
    if (n == 0) {
        EXPECT_TRUE(units.empty());
        return;
    }
    double total = 0, costliest = 0;
    for (const std::int32_t len : lengths) {
        total += model.sequence_flops(len);
        costliest = std::max(costliest, model.sequence_flops(len));
    }
    const double cap = std::max(total / static_cast<double>(kPlanGranularity), costliest);
    ASSERT_FALSE(units.empty());
    std::int64_t next = 0;
    for (std::size_t u = 0; u < units.size(); ++u) {
        const Unit& unit = units[u];
        ASSERT_EQ(unit.first, next) << "unit " << u;
        ASSERT_GT(unit.last, unit.first) << "unit " << u;
        ASSERT_LE(unit.last - unit.first, max_sequences) << "unit " << u;
        double cost = 0;
        std::int64_t tokens = 0;
        for (std::int64_t i = unit.first; i < unit.last; ++i) {
            cost += model.sequence_flops(lengths[static_cast<std::size_t>(i)]);
            tokens += lengths[static_cast<std::size_t>(i)];
        }
        EXPECT_DOUBLE_EQ(unit.cost, cost) << "unit " << u;
        EXPECT_EQ(unit.tokens, tokens) << "unit " << u;
        EXPECT_LE(unit.cost, cap) << "unit " << u;
        // Did not close early: full, or the next sequence would have taken it past the cap.
        if (u + 1 < units.size()) {
            const double next_cost = model.sequence_flops(lengths[static_cast<std::size_t>(unit.last)]);
            EXPECT_TRUE(unit.last - unit.first == max_sequences || unit.cost + next_cost > cap)
                << "unit " << u << " closed early";
        }
        next = unit.last;
    }
    EXPECT_EQ(next, n);
}

// Every unit in exactly one share, each share ascending, the share sums and the imbalance
// formula right.
void expect_valid_plan(const std::vector<Unit>& units, int ranks, const Plan& plan) {
    ASSERT_EQ(plan.ranks.size(), static_cast<std::size_t>(ranks));
    std::vector<int> seen(units.size(), 0);
    double total = 0, highest = 0;
    for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
        const RankShare& share = plan.ranks[r];
        EXPECT_TRUE(std::is_sorted(share.units.begin(), share.units.end())) << "rank " << r;
        double cost = 0;
        std::int64_t sequences = 0, tokens = 0;
        for (const std::int64_t u : share.units) {
            ASSERT_GE(u, 0);
            ASSERT_LT(u, static_cast<std::int64_t>(units.size()));
            ++seen[static_cast<std::size_t>(u)];
            cost += units[static_cast<std::size_t>(u)].cost;
            sequences += units[static_cast<std::size_t>(u)].last - units[static_cast<std::size_t>(u)].first;
            tokens += units[static_cast<std::size_t>(u)].tokens;
        }
        EXPECT_NEAR(share.cost, cost, 1e-9 * std::max(1.0, cost)) << "rank " << r;
        EXPECT_EQ(share.sequences, sequences) << "rank " << r;
        EXPECT_EQ(share.tokens, tokens) << "rank " << r;
        total += cost;
        highest = std::max(highest, cost);
    }
    for (std::size_t u = 0; u < seen.size(); ++u) ASSERT_EQ(seen[u], 1) << "unit " << u << " assigned " << seen[u] << " times";
    const double expected = total > 0 ? highest / (total / ranks) - 1.0 : 0.0;
    EXPECT_NEAR(plan.imbalance, expected, 1e-9);
    EXPECT_GE(plan.imbalance, -1e-12);
}

void expect_contiguous(const Plan& plan, std::size_t unit_count) {
    std::int64_t next = 0;
    for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
        for (const std::int64_t u : plan.ranks[r].units) {
            ASSERT_EQ(u, next) << "rank " << r << " is not the continuation of rank " << r - 1;
            ++next;
        }
    }
    EXPECT_EQ(next, static_cast<std::int64_t>(unit_count));
}

TEST(CostModel, MatchesTheFormula) {
    CostModel m = attention_only();
    // 2 * 100^2 * 1 * 128 + (100 + 16) * (192 + 65) + 1
    EXPECT_DOUBLE_EQ(m.sequence_flops(100), 2.0 * 10000 * 128 + 116.0 * 257 + 1);
    m.causal = true;
    EXPECT_DOUBLE_EQ(m.sequence_flops(100), 2.0 * 5050 * 128 + 116.0 * 257 + 1);

    const CostModel p = projected();
    const double attention = 2.0 * (10.0 * 11 / 2) * 4 * 32;
    const double projections = 2.0 * 10 * 64 * 4 * 48 + 2.0 * 10 * 4 * 16 * 32;
    const double data = (10.0 + 16) * (64 + 32 + 4) + 1;
    EXPECT_DOUBLE_EQ(p.sequence_flops(10), attention + projections + data);
}

TEST(CostModel, GroupedQueryAttentionProjectsFewerKeysAndValues) {
    // H = 4 query heads on G = 1 K/V head: the attention itself is unchanged (every query head
    // still attends), the projections and the data read shrink to H d_k + G (d_k + d_v).
    CostModel g = projected();
    g.kv_heads = 1;
    const double attention = 2.0 * (10.0 * 11 / 2) * 4 * 32;
    const double projections = 2.0 * 10 * 64 * (4 * 16 + 1 * (16 + 16)) + 2.0 * 10 * 4 * 16 * 32;
    const double data = (10.0 + 16) * (64 + 32 + 4) + 1;
    EXPECT_DOUBLE_EQ(g.sequence_flops(10), attention + projections + data);
    g.kv_heads = 4;  // G = H: the plain formula
    EXPECT_DOUBLE_EQ(g.sequence_flops(10), projected().sequence_flops(10));

    CostModel qkv = attention_only();  // Q, K, V read as given: their widths are the data
    qkv.heads = 8;
    qkv.d_k = qkv.d_v = 16;
    qkv.kv_heads = 2;
    EXPECT_DOUBLE_EQ(qkv.sequence_flops(10), 2.0 * 100 * 8 * 32 + (10.0 + 16) * (8 * 16 + 2 * 32 + 8 * 16 + 8) + 1);
}

TEST(CostModel, EmptySequencesAreNotFreeAndCostGrowsWithLength) {
    for (const CostModel& m : {CostModel{}, attention_only(), projected()}) {
        EXPECT_GT(m.sequence_flops(0), 0.0);
        for (std::int64_t len = 0; len < 600; ++len) ASSERT_LT(m.sequence_flops(len), m.sequence_flops(len + 1));
    }
}

TEST(FormUnits, CoverAllSequencesInOrderWithinTheBounds) {
    std::mt19937_64 rng(7);
    for (int trial = 0; trial < 60; ++trial) {
        const std::int64_t n = static_cast<std::int64_t>(rng() % 3000);
        const std::int64_t max_sequences = 1 + static_cast<std::int64_t>(rng() % 50);
        const auto lengths = trial % 2 ? zipf_lengths(n, 512, 1.2, rng()) : uniform_lengths(n, 0, 300, rng());
        const CostModel model = trial % 3 ? attention_only() : projected();
        const auto units = form_units(lengths, model, max_sequences);
        SCOPED_TRACE("trial " + std::to_string(trial));
        expect_valid_units(lengths, model, max_sequences, units);
    }
}

TEST(FormUnits, LargeRunsCloseOnCostAndHonourTheMemoryBound) {
    // Enough sequences that the cap is total / kPlanGranularity, not the costliest sequence:
    // then every unit costs at most the cap and any two neighbours more than it.
    const auto lengths = uniform_lengths(4'000'000, 1, 512, 11);
    double total = 0;
    for (const std::int32_t len : lengths) total += attention_only().sequence_flops(len);
    ASSERT_GT(total / static_cast<double>(kPlanGranularity), attention_only().sequence_flops(512));
    for (const std::int64_t max_sequences : {std::int64_t{1000000}, std::int64_t{8}}) {
        const auto units = form_units(lengths, attention_only(), max_sequences);
        expect_valid_units(lengths, attention_only(), max_sequences, units);
        if (max_sequences == 8) {
            EXPECT_GE(units.size(), lengths.size() / 8);
        } else {
            EXPECT_GE(units.size(), static_cast<std::size_t>(kPlanGranularity));
            EXPECT_LE(units.size(), static_cast<std::size_t>(2 * kPlanGranularity) + 1);
        }
    }
}

TEST(FormUnits, NoSequencesGiveNoUnits) {
    EXPECT_TRUE(form_units({}, attention_only(), 16).empty());
    for (const int ranks : {1, 4}) {
        for (int which = 0; which < 3; ++which) {
            const Plan plan = make_plan({}, ranks, which);
            expect_valid_plan({}, ranks, plan);
            EXPECT_EQ(plan.imbalance, 0.0);
            for (const RankShare& share : plan.ranks) {
                EXPECT_TRUE(share.units.empty());
                EXPECT_EQ(share.cost, 0.0);
            }
        }
    }
    EXPECT_TRUE(merge_into_steps({}, {}, 4).empty());
}

TEST(FormUnits, AllLengthsZeroStillMakeBalancedUnits) {
    const std::vector<std::int32_t> lengths(100000, 0);
    const auto units = form_units(lengths, attention_only(), 64);
    expect_valid_units(lengths, attention_only(), 64, units);
    for (const Unit& unit : units) EXPECT_EQ(unit.tokens, 0);
    const Plan plan = plan_static(units, 7, StaticStrategy::contiguous);
    expect_valid_plan(units, 7, plan);
    for (const RankShare& share : plan.ranks) EXPECT_GT(share.sequences, 0);
    EXPECT_LT(plan.imbalance, 0.01);
}

TEST(FormUnits, RejectsBadArguments) {
    EXPECT_THROW(form_units({1, 2}, attention_only(), 0), std::invalid_argument);
    EXPECT_THROW(form_units({1, -2}, attention_only(), 4), std::invalid_argument);
}

TEST(FormUnits, OneHugeSequenceAmongSmallOnes) {
    std::vector<std::int32_t> lengths(5000, 8);
    lengths[2500] = 4096;
    const CostModel model = attention_only();
    const auto units = form_units(lengths, model, 256);
    expect_valid_units(lengths, model, 256, units);
    // The cap is the huge sequence's cost: it is a unit of its own.
    const auto huge = std::find_if(units.begin(), units.end(), [](const Unit& u) { return u.last == 2501; });
    ASSERT_NE(huge, units.end());
    EXPECT_EQ(huge->first, 2500);
    EXPECT_EQ(huge->cost, model.sequence_flops(4096));

    for (const int ranks : {2, 3, 8}) {
        for (int which = 0; which < 3; ++which) {
            const Plan plan = make_plan(units, ranks, which);
            SCOPED_TRACE("ranks " + std::to_string(ranks) + " strategy " + std::to_string(which));
            expect_valid_plan(units, ranks, plan);
            double highest = 0;
            for (const RankShare& share : plan.ranks) highest = std::max(highest, share.cost);
            EXPECT_GE(highest, huge->cost);
            // The huge unit outweighs all the others together: the optimum is a rank with it
            // alone, which LPT finds.
            if (which == 1) {
                EXPECT_DOUBLE_EQ(highest, huge->cost);
            }
        }
    }
}

TEST(FormUnits, BoundariesDoNotDependOnTheNumberOfRanks) {
    const auto lengths = zipf_lengths(200000, 512, 1.1, 3);
    const auto units = form_units(lengths, projected(), 100);
    EXPECT_EQ(form_units(lengths, projected(), 100).size(), units.size());
    std::vector<std::int64_t> firsts;
    for (const Unit& u : units) firsts.push_back(u.first);
    for (const int ranks : {1, 2, 5, 64, 1000}) {
        for (int which = 0; which < 3; ++which) {
            const Plan plan = make_plan(units, ranks, which);
            // Each rank computes exactly the sequence ranges of the units it got, so the
            // ranges of all ranks together are the units' ranges.
            std::vector<std::int64_t> got;
            for (const RankShare& share : plan.ranks) {
                for (const Step& step : merge_into_steps(units, share.units, 100)) {
                    for (std::int64_t u = step.first_unit; u < step.first_unit + step.unit_count; ++u) {
                        got.push_back(units[static_cast<std::size_t>(u)].first);
                    }
                }
            }
            std::sort(got.begin(), got.end());
            EXPECT_EQ(got, firsts) << "ranks " << ranks << " strategy " << which;
        }
    }
}

TEST(PlanStatic, ContiguousSharesAreContiguousAndOrdered) {
    std::mt19937_64 rng(5);
    for (int trial = 0; trial < 40; ++trial) {
        const auto lengths = zipf_lengths(1 + static_cast<std::int64_t>(rng() % 20000), 512, 1.2, rng());
        const auto units = form_units(lengths, attention_only(), 1 + static_cast<std::int64_t>(rng() % 64));
        const int ranks = 1 + static_cast<int>(rng() % 300);
        const Plan plan = plan_static(units, ranks, StaticStrategy::contiguous);
        SCOPED_TRACE("trial " + std::to_string(trial));
        expect_valid_plan(units, ranks, plan);
        expect_contiguous(plan, units.size());
    }
}

TEST(PlanStatic, ContiguousBoundariesAreNearestToTheCostTargets) {
    // Ten units of cost 1 on four ranks: targets 2.5, 5, 7.5, each boundary nearest (lower
    // on a tie): [0,2) [2,5) [5,7) [7,10).
    std::vector<Unit> units;
    for (std::int64_t u = 0; u < 10; ++u) units.push_back(Unit{u, u + 1, 1.0, 1});
    const Plan plan = plan_static(units, 4, StaticStrategy::contiguous);
    const std::vector<std::size_t> sizes = {plan.ranks[0].units.size(), plan.ranks[1].units.size(),
                                            plan.ranks[2].units.size(), plan.ranks[3].units.size()};
    EXPECT_EQ(sizes, (std::vector<std::size_t>{2, 3, 2, 3}));
    EXPECT_NEAR(plan.imbalance, 3.0 / 2.5 - 1.0, 1e-12);
}

// The smallest possible costliest run of a contiguous split, by dynamic programming.
double optimal_contiguous_bottleneck(const std::vector<double>& costs, int ranks) {
    const std::size_t n = costs.size();
    std::vector<double> prefix(n + 1, 0.0);
    for (std::size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
    const double inf = 1e300;
    // best[j]: the bottleneck of the first j units on the ranks so far.
    std::vector<double> best(n + 1, inf);
    best[0] = 0;
    for (int r = 0; r < ranks; ++r) {
        std::vector<double> next(n + 1, inf);
        for (std::size_t j = 0; j <= n; ++j) {
            for (std::size_t i = 0; i <= j; ++i) next[j] = std::min(next[j], std::max(best[i], prefix[j] - prefix[i]));
        }
        best = next;
    }
    return best[n];
}

TEST(PlanStatic, ContiguousAchievesTheOptimalBottleneck) {
    std::mt19937_64 rng(4242);
    for (int trial = 0; trial < 300; ++trial) {
        const int ranks = 1 + static_cast<int>(rng() % 7);
        const std::size_t count = rng() % 30;
        std::vector<Unit> units;
        std::vector<double> costs;
        for (std::size_t u = 0; u < count; ++u) {
            const double cost = static_cast<double>(rng() % 5 == 0 ? 1 + rng() % 200 : 1 + rng() % 20);
            units.push_back(Unit{static_cast<std::int64_t>(u), static_cast<std::int64_t>(u) + 1, cost, 1});
            costs.push_back(cost);
        }
        const Plan plan = plan_static(units, ranks, StaticStrategy::contiguous);
        expect_valid_plan(units, ranks, plan);
        expect_contiguous(plan, units.size());
        double highest = 0;
        for (const RankShare& share : plan.ranks) highest = std::max(highest, share.cost);
        ASSERT_EQ(highest, optimal_contiguous_bottleneck(costs, ranks)) << "trial " << trial;
    }
}

TEST(PlanStatic, EveryUnitAssignedOnceOnRandomCases) {
    std::mt19937_64 rng(9);
    for (int trial = 0; trial < 60; ++trial) {
        const auto lengths = uniform_lengths(static_cast<std::int64_t>(rng() % 5000), 0, 512, rng());
        const auto units = form_units(lengths, projected(), 1 + static_cast<std::int64_t>(rng() % 32));
        const int ranks = 1 + static_cast<int>(rng() % 100);
        for (int which = 0; which < 3; ++which) {
            SCOPED_TRACE("trial " + std::to_string(trial) + " strategy " + std::to_string(which));
            expect_valid_plan(units, ranks, make_plan(units, ranks, which));
        }
    }
}

TEST(PlanStatic, MoreRanksThanUnits) {
    const std::vector<Unit> units = {{0, 3, 5.0, 30}, {3, 4, 1.0, 10}, {4, 9, 2.0, 50}};
    for (int which = 0; which < 3; ++which) {
        const Plan plan = make_plan(units, 10, which);
        expect_valid_plan(units, 10, plan);
        int busy = 0;
        for (const RankShare& share : plan.ranks) busy += share.units.empty() ? 0 : 1;
        EXPECT_EQ(busy, 3) << "strategy " << which;
        EXPECT_NEAR(plan.imbalance, 5.0 / 0.8 - 1.0, 1e-12) << "strategy " << which;
    }
    // LPT and the dynamic schedule fill the lowest ranks first.
    const Plan lpt = plan_static(units, 10, StaticStrategy::lpt);
    EXPECT_EQ(lpt.ranks[0].units, std::vector<std::int64_t>{0});
    EXPECT_EQ(lpt.ranks[1].units, std::vector<std::int64_t>{2});
    EXPECT_EQ(lpt.ranks[2].units, std::vector<std::int64_t>{1});
}

TEST(PlanStatic, ZeroCostUnitsAreSharedByCount) {
    std::vector<Unit> ordered;
    for (std::int64_t u = 0; u < 9; ++u) ordered.push_back(Unit{u, u + 1, 0.0, 0});
    const Plan plan = plan_static(ordered, 3, StaticStrategy::contiguous);
    expect_valid_plan(ordered, 3, plan);
    for (const RankShare& share : plan.ranks) EXPECT_EQ(share.units.size(), 3u);
    EXPECT_EQ(plan.imbalance, 0.0);
}

TEST(PlanStatic, RejectsBadArguments) {
    const std::vector<Unit> units = {{0, 1, 1.0, 1}};
    EXPECT_THROW(plan_static(units, 0, StaticStrategy::lpt), std::invalid_argument);
    EXPECT_THROW(simulate_dynamic(units, -1), std::invalid_argument);
    EXPECT_THROW(plan_static({{0, 1, -1.0, 1}}, 2, StaticStrategy::contiguous), std::invalid_argument);
}

TEST(PlanStatic, DeterministicAcrossCalls) {
    const auto units = form_units(zipf_lengths(100000, 512, 1.2, 1), attention_only(), 64);
    for (int which = 0; which < 3; ++which) {
        const Plan a = make_plan(units, 37, which), b = make_plan(units, 37, which);
        for (std::size_t r = 0; r < a.ranks.size(); ++r) ASSERT_EQ(a.ranks[r].units, b.ranks[r].units);
        EXPECT_EQ(a.imbalance, b.imbalance);
    }
}

// The optimal makespan by exhaustive search with pruning (small cases only).
double optimal_makespan(const std::vector<double>& costs, int ranks) {
    std::vector<double> sorted = costs;
    std::sort(sorted.rbegin(), sorted.rend());
    std::vector<double> load(static_cast<std::size_t>(ranks), 0.0);
    double best = std::accumulate(sorted.begin(), sorted.end(), 0.0);
    std::function<void(std::size_t, double)> place = [&](std::size_t i, double current) {
        if (current >= best) return;
        if (i == sorted.size()) {
            best = current;
            return;
        }
        for (std::size_t r = 0; r < load.size(); ++r) {
            if (r > 0 && load[r] == load[r - 1]) continue;  // same as the previous rank: symmetric
            load[r] += sorted[i];
            place(i + 1, std::max(current, load[r]));
            load[r] -= sorted[i];
        }
    };
    place(0, 0.0);
    return best;
}

TEST(PlanStatic, LptWithinFourThirdsOfOptimal) {
    std::mt19937_64 rng(2024);
    double worst = 0;
    for (int trial = 0; trial < 300; ++trial) {
        const int ranks = 2 + static_cast<int>(rng() % 3);
        const std::size_t count = 1 + rng() % 10;
        std::vector<Unit> units;
        std::vector<double> costs;
        for (std::size_t u = 0; u < count; ++u) {
            const double cost = static_cast<double>(1 + rng() % 40);
            units.push_back(Unit{static_cast<std::int64_t>(u), static_cast<std::int64_t>(u) + 1, cost, 1});
            costs.push_back(cost);
        }
        const Plan plan = plan_static(units, ranks, StaticStrategy::lpt);
        expect_valid_plan(units, ranks, plan);
        double makespan = 0;
        for (const RankShare& share : plan.ranks) makespan = std::max(makespan, share.cost);
        const double optimum = optimal_makespan(costs, ranks);
        const double bound = 4.0 / 3.0 - 1.0 / (3.0 * ranks);
        ASSERT_LE(makespan, bound * optimum + 1e-9) << "trial " << trial;
        worst = std::max(worst, makespan / optimum);
    }
    // The random cases reach past optimal sometimes, so the bound is exercised.
    EXPECT_GT(worst, 1.0);
}

TEST(PlanStatic, LptAndDynamicWithinTheListSchedulingBound) {
    // Greedy onto the least loaded rank never exceeds mean + (1 - 1/P) * costliest unit.
    std::mt19937_64 rng(77);
    for (int trial = 0; trial < 30; ++trial) {
        const auto lengths = zipf_lengths(1 + static_cast<std::int64_t>(rng() % 50000), 512, 1.1, rng());
        const auto units = form_units(lengths, attention_only(), 32);
        const int ranks = 1 + static_cast<int>(rng() % 200);
        double total = 0, costliest = 0;
        for (const Unit& u : units) {
            total += u.cost;
            costliest = std::max(costliest, u.cost);
        }
        for (int which = 1; which < 3; ++which) {
            const Plan plan = make_plan(units, ranks, which);
            for (const RankShare& share : plan.ranks) {
                ASSERT_LE(share.cost, total / ranks + (1.0 - 1.0 / ranks) * costliest + 1e-6 * total)
                    << "trial " << trial << " strategy " << which;
            }
        }
    }
}

TEST(MergeIntoSteps, StepsCoverTheShareWithinTheBound) {
    std::mt19937_64 rng(31);
    for (int trial = 0; trial < 40; ++trial) {
        const std::int64_t max_sequences = 1 + static_cast<std::int64_t>(rng() % 40);
        const auto lengths = zipf_lengths(static_cast<std::int64_t>(rng() % 20000), 512, 1.2, rng());
        const auto units = form_units(lengths, attention_only(), max_sequences);
        const int ranks = 1 + static_cast<int>(rng() % 20);
        for (int which = 0; which < 3; ++which) {
            const Plan plan = make_plan(units, ranks, which);
            for (const RankShare& share : plan.ranks) {
                const auto steps = merge_into_steps(units, share.units, max_sequences);
                std::vector<std::int64_t> covered;
                for (std::size_t s = 0; s < steps.size(); ++s) {
                    const Step& step = steps[s];
                    ASSERT_GT(step.unit_count, 0);
                    ASSERT_LE(step.last - step.first, max_sequences);
                    ASSERT_EQ(step.first, units[static_cast<std::size_t>(step.first_unit)].first);
                    ASSERT_EQ(step.last,
                              units[static_cast<std::size_t>(step.first_unit + step.unit_count - 1)].last);
                    for (std::int64_t u = step.first_unit; u < step.first_unit + step.unit_count; ++u) {
                        covered.push_back(u);
                        if (u > step.first_unit) {
                            ASSERT_EQ(units[static_cast<std::size_t>(u)].first, units[static_cast<std::size_t>(u - 1)].last);
                        }
                    }
                    // Maximal: the next step could not have been appended.
                    if (s + 1 < steps.size()) {
                        const Step& next = steps[s + 1];
                        const bool adjacent = next.first_unit == step.first_unit + step.unit_count && next.first == step.last;
                        if (adjacent) {
                            const Unit& first_of_next = units[static_cast<std::size_t>(next.first_unit)];
                            EXPECT_GT(first_of_next.last - step.first, max_sequences);
                        }
                    }
                }
                ASSERT_EQ(covered, share.units);
            }
        }
    }
}

TEST(MergeIntoSteps, MergesAdjacentUnitsOnly) {
    const std::vector<Unit> units = {{0, 2, 1, 0}, {2, 4, 1, 0}, {4, 7, 1, 0}, {7, 8, 1, 0}, {8, 10, 1, 0}};
    const auto steps = merge_into_steps(units, {0, 1, 2, 4}, 5);
    ASSERT_EQ(steps.size(), 3u);
    EXPECT_EQ(steps[0].first, 0);
    EXPECT_EQ(steps[0].last, 4);
    EXPECT_EQ(steps[0].unit_count, 2);  // unit 2 would make 7 sequences
    EXPECT_EQ(steps[1].first_unit, 2);
    EXPECT_EQ(steps[1].last, 7);
    EXPECT_EQ(steps[2].first_unit, 4);  // unit 3 is not ours: no merge across the gap
    EXPECT_EQ(steps[2].first, 8);
    EXPECT_THROW(merge_into_steps(units, {2}, 2), std::invalid_argument);
    EXPECT_THROW(merge_into_steps(units, {5}, 8), std::invalid_argument);
    EXPECT_THROW(merge_into_steps(units, {0}, 0), std::invalid_argument);
}

TEST(Scale, TenMillionZipfSequencesOn4096RanksBalanceWithinTwoPercent) {
    const auto lengths = zipf_lengths(10'000'000, 512, 1.2, 1);
    // CPU time, not wall time: the machine may be shared.
    const std::clock_t start = std::clock();
    const auto units = form_units(lengths, attention_only(), 1024);
    const std::clock_t formed = std::clock();
    const Plan plan = plan_static(units, 4096, StaticStrategy::contiguous);
    const std::clock_t planned = std::clock();
    const double form_s = static_cast<double>(formed - start) / CLOCKS_PER_SEC;
    const double plan_s = static_cast<double>(planned - formed) / CLOCKS_PER_SEC;
    std::printf("units=%zu imbalance=%.3f%% form_units=%.3fs plan_static=%.3fs\n", units.size(),
                100 * plan.imbalance, form_s, plan_s);
    expect_contiguous(plan, units.size());
    EXPECT_LE(plan.imbalance, 0.02);
    // Not packed to the bottleneck from the left: the lightest rank is near the mean too.
    double total = 0, lightest = plan.ranks.front().cost;
    for (const RankShare& share : plan.ranks) {
        total += share.cost;
        lightest = std::min(lightest, share.cost);
    }
    std::printf("lightest rank %.3f%% below the mean\n", 100 * (1 - lightest / (total / 4096)));
    EXPECT_GE(lightest, 0.98 * total / 4096);
    EXPECT_LT(form_s + plan_s, 10.0);
}


// ---- Pieces: the query rows of one long sequence as units of their own ----

// Attention pairs of query rows [q0, q1) of a sequence of `len` keys (rows past len: none).
double pairs_of(const CostModel& model, std::int64_t len, std::int64_t q0, std::int64_t q1) {
    const double a = static_cast<double>(std::min(q0, len)), b = static_cast<double>(std::min(q1, len));
    return model.causal ? (b * (b + 1) - a * (a + 1)) / 2 : (b - a) * static_cast<double>(len);
}

// Every unit's positions rise without gaps from (0, 0) to (N, 0): whole units from a sequence
// start to another, the pieces of a split sequence covering its rows [0, rows) in order, each
// with the cost, tokens and key rows the models give; every piece holds at least kPieceRows
// rows unless memory forced it smaller, and its bounds are multiples of kPieceRows but for the
// sequence's end.
void expect_valid_pieces(const std::vector<std::int32_t>& lengths, const CostModel& model, const SplitOptions& split,
                         const std::vector<Unit>& units, bool memory_forced = false) {
    std::int64_t sequence = 0, row = 0;  // the next position
    for (std::size_t u = 0; u < units.size(); ++u) {
        const Unit& unit = units[u];
        SCOPED_TRACE("unit " + std::to_string(u));
        ASSERT_EQ(unit.first, sequence);
        if (!unit.piece()) {
            ASSERT_EQ(row, 0);
            ASSERT_GT(unit.last, unit.first);
            sequence = unit.last;
            continue;
        }
        const std::int32_t len = lengths[static_cast<std::size_t>(unit.first)];
        const std::int64_t rows = split.padded_rows > 0 ? split.padded_rows : len;
        ASSERT_EQ(unit.last, unit.first + 1);
        ASSERT_EQ(unit.row_first, row);
        ASSERT_GT(unit.row_last, unit.row_first);
        ASSERT_LE(unit.row_last, rows);
        EXPECT_EQ(unit.ends_sequence, unit.row_last == rows);
        EXPECT_EQ(unit.key_rows, model.causal ? std::min<std::int64_t>(unit.row_last, len) : len);
        // The piece before on its rank projected the keys up to its own last row.
        const std::int64_t keys_before = unit.row_first > 0 ? (model.causal ? std::min<std::int64_t>(unit.row_first, len) : len) : 0;
        EXPECT_DOUBLE_EQ(unit.cost, model.piece_flops(len, unit.row_first, unit.row_last, unit.key_rows, keys_before));
        EXPECT_EQ(unit.tokens, std::max<std::int64_t>(0, std::min<std::int64_t>(unit.row_last, len) - unit.row_first));
        if (!memory_forced) {
            EXPECT_EQ(unit.row_first % kPieceRows, 0);
            if (!unit.ends_sequence) {
                EXPECT_EQ(unit.row_last % kPieceRows, 0);
                EXPECT_GE(unit.row_last - unit.row_first, kPieceRows);
            }
        }
        // A sequence is either whole or split in two pieces at least.
        if (unit.row_first == 0) {
            EXPECT_FALSE(unit.ends_sequence);
        }
        row = unit.ends_sequence ? 0 : unit.row_last;
        if (unit.ends_sequence) sequence = unit.first + 1;
    }
    EXPECT_EQ(sequence, static_cast<std::int64_t>(lengths.size()));
    EXPECT_EQ(row, 0);
    // The pieces' attention pairs are their sequence's, exactly.
    double whole = 0, pieces = 0;
    for (const Unit& unit : units) {
        if (!unit.piece()) continue;
        const std::int32_t len = lengths[static_cast<std::size_t>(unit.first)];
        if (unit.row_first == 0) whole += pairs_of(model, len, 0, len);
        pieces += pairs_of(model, len, unit.row_first, unit.row_last);
    }
    EXPECT_EQ(pieces, whole);
}

TEST(CostModel, PiecesAddUpToTheirSequenceAndChargeTheirKeys) {
    for (const CostModel& model : {attention_only(), projected()}) {
        const std::int64_t len = 1000;
        // One piece of every row with all keys is the sequence.
        EXPECT_NEAR(model.piece_flops(len, 0, len, len), model.sequence_flops(len), 1e-9 * model.sequence_flops(len));
        // Cut in two, each half reads the keys again: dearer by the keys' reading (and projecting).
        const std::int64_t keys_low = model.causal ? 400 : len;
        const double halves = model.piece_flops(len, 0, 400, keys_low) + model.piece_flops(len, 400, len, len);
        EXPECT_GT(halves, model.sequence_flops(len));
        // The second half on the rank of the first: the keys the first projected are not
        // projected again (StepComputer carries them), only read.
        const double carried = model.piece_flops(len, 0, 400, keys_low) + model.piece_flops(len, 400, len, len, keys_low);
        EXPECT_GT(carried, model.sequence_flops(len));
        if (model.d_in > 0) {
            EXPECT_LT(carried, halves);
        } else {
            EXPECT_EQ(carried, halves);
        }
        // Rows past the length cost only their fixed part.
        EXPECT_LT(model.piece_flops(len, len, len + 64, len), model.piece_flops(len, len - 64, len, len));
    }
}

TEST(FormUnits, WithoutSplittingTheSameUnitsAsBefore) {
    const auto lengths = zipf_lengths(50000, 512, 1.1, 9);
    for (const CostModel& model : {attention_only(), projected()}) {
        const auto before = form_units(lengths, model, 64);
        const auto after = form_units(lengths, model, 64, SplitOptions{});
        ASSERT_EQ(before.size(), after.size());
        for (std::size_t u = 0; u < before.size(); ++u) {
            EXPECT_EQ(after[u].first, before[u].first);
            EXPECT_EQ(after[u].last, before[u].last);
            EXPECT_FALSE(after[u].piece());
        }
        EXPECT_TRUE(unit_rows_of(after).empty());  // a journal without /journal/unit_rows
    }
}

TEST(FormUnits, LongSequencesAreSplitIntoPiecesThatCoverTheirRows) {
    std::vector<std::int32_t> lengths = uniform_lengths(3000, 1, 200, 4);
    lengths[7] = 9000;
    lengths[1500] = 5000;
    lengths[2999] = 12000;
    lengths[2000] = 31;  // short and costly relative to nothing: never split
    for (const CostModel& model : {attention_only(), projected()}) {
        for (const std::int64_t padded_rows : {std::int64_t{0}, std::int64_t{12000}}) {
            SplitOptions split;
            split.ranks = 64;
            split.padded_rows = padded_rows;
            const auto units = form_units(lengths, model, 256, split);
            SCOPED_TRACE(padded_rows ? "padded" : "packed");
            expect_valid_pieces(lengths, model, split, units);
            double total = 0;
            for (const std::int32_t len : lengths) total += model.sequence_flops(len);
            const double cap = total / (64.0 * kPiecesPerRank);
            const double pair_flops = 2.0 * static_cast<double>(model.heads * (model.d_k + model.d_v));
            for (const Unit& unit : units) {
                // A piece's attention about the cap (rounding its bounds to kPieceRows rows may
                // add some), unless it is as short as a piece may be; a whole unit never above
                // the costliest sequence left whole.
                if (unit.piece()) {
                    const std::int32_t len = lengths[static_cast<std::size_t>(unit.first)];
                    const double attention = pair_flops * pairs_of(model, len, unit.row_first, unit.row_last);
                    const double rounding = pair_flops * pairs_of(model, len, unit.row_last, unit.row_last + kPieceRows);
                    EXPECT_TRUE(unit.tokens <= 2 * kPieceRows || attention <= 1.5 * cap + rounding)
                        << "piece of sequence " << unit.first << " rows [" << unit.row_first << ", " << unit.row_last
                        << "): attention " << attention << ", cap " << cap;
                } else {
                    EXPECT_LE(unit.cost, std::max(total / kPlanGranularity, cap) * (1 + 1e-12));
                }
            }
            for (const std::int64_t split_one : {7, 1500, 2999}) {
                EXPECT_TRUE(std::any_of(units.begin(), units.end(),
                                        [&](const Unit& u) { return u.piece() && u.first == split_one; }));
            }
            // Positions round-trip through the journal's representation.
            const auto again = units_with_positions(lengths, model, unit_bounds_of(units), unit_rows_of(units), split);
            ASSERT_EQ(again.size(), units.size());
            for (std::size_t u = 0; u < units.size(); ++u) {
                EXPECT_EQ(again[u].first, units[u].first);
                EXPECT_EQ(again[u].last, units[u].last);
                EXPECT_EQ(again[u].row_first, units[u].row_first);
                EXPECT_EQ(again[u].row_last, units[u].row_last);
                EXPECT_EQ(again[u].key_rows, units[u].key_rows);
                EXPECT_DOUBLE_EQ(again[u].cost, units[u].cost);
            }
        }
    }
}

TEST(FormUnits, CausalPiecesBalanceTheirPairsNotTheirRows) {
    CostModel model = attention_only();
    model.causal = true;
    std::vector<std::int32_t> lengths(200, 64);
    lengths[100] = 16384;
    SplitOptions split;
    split.ranks = 16;
    const auto units = form_units(lengths, model, 1024, split);
    expect_valid_pieces(lengths, model, split, units);
    std::vector<const Unit*> pieces;
    for (const Unit& unit : units) {
        if (unit.piece()) pieces.push_back(&unit);
    }
    ASSERT_GE(pieces.size(), 8u);
    // The first rows see few keys: the first piece is longer than the last, costs about alike.
    EXPECT_GT(pieces.front()->row_last - pieces.front()->row_first, 2 * (pieces.back()->row_last - pieces.back()->row_first));
    EXPECT_LT(pieces.back()->cost, 2.0 * pieces[pieces.size() / 2]->cost);
    // With causal masking a piece needs the keys up to its last row only.
    EXPECT_EQ(pieces.front()->key_rows, pieces.front()->row_last);
}

TEST(FormUnits, MemorySplitsASequenceIntoSlabsThatFit) {
    const CostModel model = attention_only();
    std::vector<std::int32_t> lengths = {100, 8192, 50, 3000};
    SplitOptions split;  // one rank: no balance splits
    split.padded_rows = 8192;
    split.memory.query_row = 1000;
    split.memory.key_row = 500;
    split.memory.weights_row = 2 * 8192 * 4;
    split.memory.weights_first = 0;
    split.memory.weights_last = 4;
    split.memory.budget = 64u << 20;  // a whole sequence (8192 rows of ~67 KB) does not fit
    const auto units = form_units(lengths, model, 4, split);
    expect_valid_pieces(lengths, model, split, units, true);
    ASSERT_GT(units.size(), 4u);
    for (const Unit& unit : units) {
        EXPECT_LE(unit.bytes, split.memory.budget);
        EXPECT_TRUE(unit.piece());  // every padded sequence is L rows: none fits whole
    }
    // Steps may merge the slabs of a sequence only within the budget.
    std::vector<std::int64_t> all(units.size());
    std::iota(all.begin(), all.end(), 0);
    const auto steps = merge_into_steps(units, all, 4, split.memory.budget);
    for (const Step& step : steps) {
        StepLoad load;
        for (std::int64_t u = step.first_unit; u < step.first_unit + step.unit_count; ++u) load.add(units[static_cast<std::size_t>(u)]);
        EXPECT_LE(load.bytes, split.memory.budget);
    }
}

TEST(MergeIntoSteps, PiecesMergeOnlyWithTheRestOfTheirSequence) {
    std::vector<std::int32_t> lengths(40, 10);
    lengths[20] = 4000;
    SplitOptions split;
    split.ranks = 8;
    const auto units = form_units(lengths, attention_only(), 100, split);
    std::vector<std::int64_t> all(units.size());
    std::iota(all.begin(), all.end(), 0);
    const auto steps = merge_into_steps(units, all, 100);
    ASSERT_EQ(steps.size(), 3u);  // before, the pieces of sequence 20, after
    EXPECT_EQ(steps[0].last, 20);
    EXPECT_EQ(steps[1].first, 20);
    EXPECT_EQ(steps[1].row_first, 0);
    EXPECT_EQ(steps[1].row_last, 4000);
    EXPECT_EQ(steps[2].first, 21);
    EXPECT_EQ(steps[2].row_last, 0);
}

TEST(UnitsWithPositions, RejectsPositionsThatDoNotDescribeTheSequences) {
    const std::vector<std::int32_t> lengths = {10, 100, 10};
    const SplitOptions split;
    EXPECT_NO_THROW(units_with_positions(lengths, attention_only(), {0, 1, 1, 2, 3}, {0, 0, 48, 0, 0}, split));
    EXPECT_THROW(units_with_positions(lengths, attention_only(), {0, 1, 1, 2, 3}, {0, 0, 148, 0, 0}, split),
                 std::invalid_argument);  // past the sequence's rows
    EXPECT_THROW(units_with_positions(lengths, attention_only(), {0, 1, 3}, {0, 5, 0}, split),
                 std::invalid_argument);  // a piece running into the next sequence
    EXPECT_THROW(units_with_positions(lengths, attention_only(), {0, 2}, {0, 0}, split), std::invalid_argument);
}

// The heavy tail: 20,000 Pareto lengths up to L = 16,384 (mean about 490, the longest
// over 30 times it), d = 64. Without pieces one sequence outweighs a whole rank's share from
// a few dozen ranks on; with them the contiguous split stays within 2% at 512 ranks and 5% at
// 4096.
TEST(Scale, HeavyTailedLengthsBalanceWithPieces) {
    const auto lengths = pareto_lengths(20000, 16384, 175, 1.5, 1);
    double mean = 0;
    for (const std::int32_t len : lengths) mean += len;
    mean /= static_cast<double>(lengths.size());
    ASSERT_GE(*std::max_element(lengths.begin(), lengths.end()), 30 * mean);
    const CostModel model = attention_only();
    for (const int ranks : {16, 64, 512, 4096}) {
        SplitOptions split;
        split.ranks = ranks;
        split.padded_rows = 16384;
        const auto units = form_units(lengths, model, 1 << 20, split);
        const Plan plan = plan_static(units, ranks, StaticStrategy::contiguous);
        const Plan whole = plan_static(form_units(lengths, model, 1 << 20), ranks, StaticStrategy::contiguous);
        std::printf("ranks %5d: units %6zu, imbalance %.3f%% (whole sequences only: %.1f%%)\n", ranks, units.size(),
                    100 * plan.imbalance, 100 * whole.imbalance);
        EXPECT_LE(plan.imbalance, ranks <= 512 ? 0.02 : 0.05) << ranks << " ranks";
        expect_valid_plan(units, ranks, plan);
    }
}

TEST(Scale, TenMillionHeavyTailedSequencesPlanWithinTenSeconds) {
    const auto lengths = pareto_lengths(10'000'000, 16384, 175, 1.5, 2);
    const std::clock_t start = std::clock();
    SplitOptions split;
    split.ranks = 4096;
    split.padded_rows = 16384;
    const auto units = form_units(lengths, attention_only(), 1 << 20, split);
    const Plan plan = plan_static(units, 4096, StaticStrategy::contiguous);
    const double seconds = static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
    std::printf("units=%zu imbalance=%.3f%% planned in %.2f s CPU\n", units.size(), 100 * plan.imbalance, seconds);
    EXPECT_LE(plan.imbalance, 0.05);
    EXPECT_LT(seconds, 10.0);
}

}  // namespace
}  // namespace attnbatch::distributed
