// The schedules of rounds: static_rounds (each rank's contiguous share cut into steps) and
// the dynamic scheduler (rank 0 decides every round from the ranks' rates), the latter run
// on P threads through ThreadComm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "attnbatch/distributed/plan.hpp"
#include "attnbatch/distributed/schedule.hpp"
#include "support/length_distributions.hpp"
#include "support/thread_comm.hpp"

namespace attnbatch::distributed {
namespace {

using testing::run_ranks;

CostModel attention_model() {
    CostModel m;
    m.heads = 4;
    m.d_k = 32;
    m.d_v = 32;
    return m;
}

// Units of random sizes (1..max_unit sequences) and random costs, possibly zero.
std::vector<Unit> random_units(std::int64_t count, std::int64_t max_unit, std::mt19937_64& rng) {
    std::vector<Unit> units;
    std::int64_t first = 0;
    for (std::int64_t u = 0; u < count; ++u) {
        Unit unit;
        unit.first = first;
        unit.last = first + 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(max_unit));
        unit.cost = (rng() % 7 == 0) ? 0.0 : 1.0 + static_cast<double>(rng() % 1000);
        unit.tokens = unit.last - unit.first;
        first = unit.last;
        units.push_back(unit);
    }
    return units;
}

std::int64_t sequences_of(const RankStep& step) { return step.last - step.first; }

// Checks a step's fields against the units it names.
void expect_step_matches_units(const std::vector<Unit>& units, const RankStep& step) {
    ASSERT_GE(step.first_unit, 0);
    ASSERT_GE(step.unit_count, 1);
    ASSERT_LE(step.first_unit + step.unit_count, static_cast<std::int64_t>(units.size()));
    EXPECT_EQ(step.first, units[static_cast<std::size_t>(step.first_unit)].first);
    EXPECT_EQ(step.last, units[static_cast<std::size_t>(step.first_unit + step.unit_count - 1)].last);
    double cost = 0;
    for (std::int64_t u = step.first_unit; u < step.first_unit + step.unit_count; ++u) cost += units[static_cast<std::size_t>(u)].cost;
    EXPECT_DOUBLE_EQ(step.cost, cost);
}

// Every property static_rounds promises, for one case.
void expect_valid_static_rounds(const std::vector<Unit>& units, const Plan& plan, std::int64_t max_sequences,
                                int min_rounds, const std::vector<Round>& rounds) {
    const std::size_t ranks = plan.ranks.size();
    std::vector<int> seen(units.size(), 0);
    std::size_t smallest = units.size();
    for (const RankShare& share : plan.ranks) {
        if (!share.units.empty()) smallest = std::min(smallest, share.units.size());
    }
    const std::int64_t wanted = std::min<std::int64_t>(std::max(1, min_rounds), static_cast<std::int64_t>(smallest));
    for (const Round& round : rounds) {
        ASSERT_EQ(round.size(), ranks);
        EXPECT_FALSE(round_is_empty(round)) << "a static schedule has no all-empty round";
    }
    for (std::size_t r = 0; r < ranks; ++r) {
        SCOPED_TRACE("rank " + std::to_string(r));
        const std::vector<std::int64_t>& share = plan.ranks[r].units;
        std::vector<std::int64_t> handed;  // this rank's units in round order
        std::int64_t steps = 0;
        for (const Round& round : rounds) {
            const RankStep& step = round[r];
            if (step.empty()) continue;
            ++steps;
            expect_step_matches_units(units, step);
            EXPECT_LE(sequences_of(step), max_sequences);
            for (std::int64_t u = step.first_unit; u < step.first_unit + step.unit_count; ++u) {
                handed.push_back(u);
                ++seen[static_cast<std::size_t>(u)];
            }
        }
        // In order and exactly the share: with contiguous shares, one ordered block.
        EXPECT_EQ(handed, share);
        // At least min_rounds steps, but no more than the smallest non-empty share can make:
        // rounds are collective, so every rank is cut into as many steps as the others
        // (a rank with more units but the same cost gets steps of the same cost, not more
        // rounds of cheaper steps that the others would wait through).
        EXPECT_GE(steps, std::min<std::int64_t>(wanted, static_cast<std::int64_t>(share.size())))
            << "share of " << share.size() << " units, min_rounds " << min_rounds << ", smallest share " << smallest;
    }
    for (std::size_t u = 0; u < units.size(); ++u) EXPECT_EQ(seen[u], 1) << "unit " << u;
}

TEST(StaticRounds, RandomUnitsAreHandedOutOnceInOrderWithinTheBounds) {
    std::mt19937_64 rng(2024);
    for (int trial = 0; trial < 300; ++trial) {
        const std::int64_t count = static_cast<std::int64_t>(rng() % 200);
        const std::int64_t max_unit = 1 + static_cast<std::int64_t>(rng() % 6);
        const std::vector<Unit> units = random_units(count, max_unit, rng);
        const int ranks = 1 + static_cast<int>(rng() % 9);
        const std::int64_t max_sequences = max_unit + static_cast<std::int64_t>(rng() % 20);
        const int min_rounds = static_cast<int>(rng() % 12);  // 0 and 1 included
        const Plan plan = plan_static(units, ranks, StaticStrategy::contiguous);
        SCOPED_TRACE("trial " + std::to_string(trial) + ": " + std::to_string(count) + " units, " + std::to_string(ranks) +
                     " ranks, max_sequences " + std::to_string(max_sequences) + ", min_rounds " + std::to_string(min_rounds));
        const std::vector<Round> rounds = static_rounds(units, plan, max_sequences, min_rounds);
        expect_valid_static_rounds(units, plan, max_sequences, min_rounds, rounds);
        if (HasFailure()) return;
    }
}

TEST(StaticRounds, RaggedLengthsThroughFormUnits) {
    std::mt19937_64 rng(99);
    for (int trial = 0; trial < 40; ++trial) {
        const std::int64_t n = static_cast<std::int64_t>(rng() % 5000);
        const std::int64_t max_sequences = 1 + static_cast<std::int64_t>(rng() % 64);
        const auto lengths = trial % 2 ? testing::zipf_lengths(n, 512, 1.2, rng()) : testing::uniform_lengths(n, 0, 300, rng());
        const std::vector<Unit> units = form_units(lengths, attention_model(), max_sequences);
        const int ranks = 1 + static_cast<int>(rng() % 8);
        const Plan plan = plan_static(units, ranks, StaticStrategy::contiguous);
        SCOPED_TRACE("trial " + std::to_string(trial));
        expect_valid_static_rounds(units, plan, max_sequences, 8, static_rounds(units, plan, max_sequences, 8));
        if (HasFailure()) return;
    }
}

// With the output's chunk grid, a step past its share of the cost goes on to the next chunk
// bound within one chunk: 2000 sequences of equal cost on 2 ranks, 8 steps of 125 each without
// it, end on multiples of 16 with it (but each rank's last, at its share's end), each within
// one chunk of its share; and every promise of static_rounds still holds. Random units too.
TEST(StaticRounds, StepsEndOnChunkBoundsWithinOneChunk) {
    std::vector<Unit> units;
    for (std::int64_t s = 0; s < 2000; ++s) units.push_back(Unit{s, s + 1, 1.0, 1});
    const Plan plan = plan_static(units, 2, StaticStrategy::contiguous);
    const std::vector<Round> plain = static_rounds(units, plan, 2000, 8);
    const std::vector<Round> rounds = static_rounds(units, plan, 2000, 8, 0, 0, io::SequenceChunks{0, 16});
    expect_valid_static_rounds(units, plan, 2000, 8, rounds);
    ASSERT_EQ(rounds.size(), plain.size());
    int off_grid_without = 0;
    for (std::size_t k = 0; k < rounds.size(); ++k) {
        for (std::size_t r = 0; r < 2; ++r) {
            const RankStep& step = rounds[k][r];
            const bool share_end = step.last == units[static_cast<std::size_t>(plan.ranks[r].units.back())].last;
            if (!share_end) {
                EXPECT_EQ(step.last % 16, 0) << "round " << k << " rank " << r << " ends at " << step.last;
            }
            EXPECT_LT(std::abs(step.last - plain[k][r].last), 16) << "round " << k << " rank " << r;
            if (!share_end && plain[k][r].last % 16 != 0) ++off_grid_without;
        }
    }
    EXPECT_GT(off_grid_without, 0) << "the case must need the grid";
    // A grid too coarse for the steps (a chunk more than a quarter of a step) is not followed.
    const std::vector<Round> coarse = static_rounds(units, plan, 2000, 8, 0, 0, io::SequenceChunks{0, 64});
    ASSERT_EQ(coarse.size(), plain.size());
    for (std::size_t k = 0; k < coarse.size(); ++k) EXPECT_EQ(coarse[k][0].last, plain[k][0].last);

    std::mt19937_64 rng(7);
    for (int trial = 0; trial < 100; ++trial) {
        const std::vector<Unit> random = random_units(static_cast<std::int64_t>(rng() % 300), 4, rng);
        const int ranks = 1 + static_cast<int>(rng() % 5);
        const Plan random_plan = plan_static(random, ranks, StaticStrategy::contiguous);
        const io::SequenceChunks grid{static_cast<std::int64_t>(rng() % 5), 1 + static_cast<std::int64_t>(rng() % 8)};
        SCOPED_TRACE("trial " + std::to_string(trial));
        expect_valid_static_rounds(random, random_plan, 40, 8, static_rounds(random, random_plan, 40, 8, 0, 0, grid));
        if (HasFailure()) return;
    }
}

TEST(StaticRounds, SkewedCostsStillGiveMinRoundsSteps) {
    // Cheap units before a costly one: the cost boundaries alone would merge the cheap ones,
    // leaving fewer steps (rounds of overlap) than min_rounds with enough units for them.
    const std::vector<Unit> units = {{0, 1, 1.0, 1}, {1, 2, 1.0, 1}, {2, 3, 100.0, 1}};
    const Plan plan = plan_static(units, 1, StaticStrategy::contiguous);
    const std::vector<Round> rounds = static_rounds(units, plan, 8, 3);
    expect_valid_static_rounds(units, plan, 8, 3, rounds);
    EXPECT_EQ(rounds.size(), 3u);
    // Same with a costly unit first and cheap ones after.
    const std::vector<Unit> reversed = {{0, 1, 100.0, 1}, {1, 2, 1.0, 1}, {2, 3, 1.0, 1}, {3, 4, 1.0, 1}};
    const Plan plan2 = plan_static(reversed, 1, StaticStrategy::contiguous);
    const std::vector<Round> rounds2 = static_rounds(reversed, plan2, 8, 4);
    expect_valid_static_rounds(reversed, plan2, 8, 4, rounds2);
    EXPECT_EQ(rounds2.size(), 4u);
}

TEST(StaticRounds, RanksWithFewerUnitsKeepTheRoundsBalanced) {
    // Rank 0 gets one costly unit, rank 1 many cheap ones of the same total cost: one round
    // each, not one round for rank 0 and min_rounds rounds of waiting for rank 1.
    std::vector<Unit> units = {{0, 1, 1000.0, 1}};
    for (std::int64_t i = 1; i <= 100; ++i) units.push_back(Unit{i, i + 1, 10.0, 1});
    const Plan plan = plan_static(units, 2, StaticStrategy::contiguous);
    ASSERT_EQ(plan.ranks[0].units.size(), 1u);
    const std::vector<Round> rounds = static_rounds(units, plan, 1000, 8);
    expect_valid_static_rounds(units, plan, 1000, 8, rounds);
    EXPECT_EQ(rounds.size(), 1u);
}

TEST(StaticRounds, NoUnitsGiveNoRounds) {
    for (const int ranks : {1, 3}) {
        const Plan plan = plan_static({}, ranks, StaticStrategy::contiguous);
        EXPECT_TRUE(static_rounds({}, plan, 4, 8).empty());
    }
}

TEST(StaticRounds, MoreRanksThanUnitsLeaveTheExtraRanksEmpty) {
    std::mt19937_64 rng(5);
    const std::vector<Unit> units = random_units(3, 2, rng);
    const Plan plan = plan_static(units, 6, StaticStrategy::contiguous);
    const std::vector<Round> rounds = static_rounds(units, plan, 8, 8);
    expect_valid_static_rounds(units, plan, 8, 8, rounds);
}

TEST(StaticRounds, MemoryBoundAddsStepsBeyondMinRounds) {
    // 1000 one-sequence units of equal cost on 2 ranks, at most 10 sequences a step: at
    // least 50 steps per rank whatever min_rounds says.
    std::vector<Unit> units;
    for (std::int64_t i = 0; i < 1000; ++i) units.push_back(Unit{i, i + 1, 1.0, 1});
    const Plan plan = plan_static(units, 2, StaticStrategy::contiguous);
    const std::vector<Round> rounds = static_rounds(units, plan, 10, 2);
    expect_valid_static_rounds(units, plan, 10, 2, rounds);
    EXPECT_GE(rounds.size(), 50u);
}

// Per-round cost spread: max / min - 1 of the ranks' step costs in each round.
double worst_round_spread(const std::vector<Round>& rounds) {
    double worst = 0;
    for (const Round& round : rounds) {
        double lo = 0, hi = 0;
        bool any = false;
        for (const RankStep& step : round) {
            if (step.empty()) continue;
            lo = any ? std::min(lo, step.cost) : step.cost;
            hi = any ? std::max(hi, step.cost) : step.cost;
            any = true;
        }
        if (any && lo > 0) worst = std::max(worst, hi / lo - 1);
    }
    return worst;
}

TEST(StaticRounds, UniformLengthsGiveRoundsOfEvenCost) {
    for (const bool constant : {true, false}) {
        SCOPED_TRACE(constant ? "constant lengths" : "uniform random lengths");
        const auto lengths = constant ? std::vector<std::int32_t>(20000, 128) : testing::uniform_lengths(20000, 64, 192, 17);
        const std::vector<Unit> units = form_units(lengths, attention_model(), 1 << 20);
        for (const int ranks : {2, 3, 4, 7}) {
            const Plan plan = plan_static(units, ranks, StaticStrategy::contiguous);
            const std::vector<Round> rounds = static_rounds(units, plan, 1 << 20, 8);
            expect_valid_static_rounds(units, plan, 1 << 20, 8, rounds);
            EXPECT_GE(rounds.size(), 8u);
            EXPECT_LE(rounds.size(), 9u);
            EXPECT_LT(worst_round_spread(rounds), 0.03) << ranks << " ranks";
        }
    }
}

TEST(StaticScheduler, HandsOutTheRoundsThenEmptyRounds) {
    std::mt19937_64 rng(3);
    const std::vector<Unit> units = random_units(40, 3, rng);
    const Plan plan = plan_static(units, 1, StaticStrategy::contiguous);
    const std::vector<Round> rounds = static_rounds(units, plan, 16, 8);
    auto scheduler = make_static_scheduler(rounds);
    auto comm = make_serial_comm();
    for (const Round& expected : rounds) {
        const Round got = scheduler->next(*comm, 1.0);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].first_unit, expected[0].first_unit);
        EXPECT_EQ(got[0].unit_count, expected[0].unit_count);
    }
    for (int i = 0; i < 3; ++i) {
        const Round after = scheduler->next(*comm, 1.0);
        EXPECT_EQ(after.size(), 1u);
        EXPECT_TRUE(round_is_empty(after));
    }
}

// ---------------------------------------------------------------- dynamic, on P threads

bool same_round(const Round& a, const Round& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const RankStep &x = a[i], &y = b[i];
        if (x.first != y.first || x.last != y.last || x.first_unit != y.first_unit || x.unit_count != y.unit_count ||
            std::memcmp(&x.cost, &y.cost, sizeof x.cost) != 0) {
            return false;
        }
    }
    return true;
}

// Every rank's rounds from a dynamic scheduler, `rate(rank, round)` the rate it reports.
template <class Rate>
std::vector<std::vector<Round>> dynamic_rounds(int ranks, const std::vector<Unit>& units, std::int64_t max_sequences,
                                               int min_rounds, Rate rate, io::SequenceChunks chunks = {}) {
    std::vector<std::vector<Round>> all(static_cast<std::size_t>(ranks));
    run_ranks(ranks, [&](Comm& comm) {
        const std::vector<Unit> mine = units;  // each rank its own copy, as in a real run
        auto scheduler = make_dynamic_scheduler(mine, comm.size(), max_sequences, min_rounds, 0, 0, chunks);
        std::vector<Round>& got = all[static_cast<std::size_t>(comm.rank())];
        for (int k = 0;; ++k) {
            if (k > 100000) throw std::runtime_error("the dynamic scheduler never ends");
            got.push_back(scheduler->next(comm, rate(comm.rank(), k)));
            if (round_is_empty(got.back())) break;
        }
    });
    return all;
}

void expect_valid_dynamic_rounds(int ranks, const std::vector<Unit>& units, std::int64_t max_sequences,
                                 const std::vector<std::vector<Round>>& all) {
    ASSERT_EQ(all.size(), static_cast<std::size_t>(ranks));
    const std::vector<Round>& rounds = all[0];
    for (int r = 1; r < ranks; ++r) {
        ASSERT_EQ(all[static_cast<std::size_t>(r)].size(), rounds.size()) << "rank " << r;
        for (std::size_t k = 0; k < rounds.size(); ++k) {
            EXPECT_TRUE(same_round(all[static_cast<std::size_t>(r)][k], rounds[k])) << "rank " << r << " round " << k;
        }
    }
    ASSERT_FALSE(rounds.empty());
    EXPECT_TRUE(round_is_empty(rounds.back()));
    std::int64_t next_unit = 0;
    for (std::size_t k = 0; k < rounds.size(); ++k) {
        ASSERT_EQ(rounds[k].size(), static_cast<std::size_t>(ranks));
        if (k + 1 < rounds.size()) {
            EXPECT_FALSE(round_is_empty(rounds[k])) << "round " << k << " ends the run early";
        }
        for (const RankStep& step : rounds[k]) {  // in order: round by round, rank by rank
            if (step.empty()) continue;
            expect_step_matches_units(units, step);
            EXPECT_EQ(step.first_unit, next_unit) << "round " << k;
            EXPECT_LE(sequences_of(step), max_sequences);
            next_unit = step.first_unit + step.unit_count;
        }
    }
    EXPECT_EQ(next_unit, static_cast<std::int64_t>(units.size()));
}

TEST(DynamicScheduler, EveryRankGetsTheSameRoundsAndEveryUnitOnceInOrder) {
    std::mt19937_64 rng(11);
    for (const int ranks : {1, 2, 3, 5}) {
        for (int trial = 0; trial < 6; ++trial) {
            const std::int64_t count = trial == 0 ? 0 : trial == 1 ? 1 : static_cast<std::int64_t>(rng() % 400);
            const std::int64_t max_unit = 1 + static_cast<std::int64_t>(rng() % 4);
            const std::vector<Unit> units = random_units(count, max_unit, rng);
            const std::int64_t max_sequences = max_unit + static_cast<std::int64_t>(rng() % 12);
            const int min_rounds = static_cast<int>(rng() % 10);
            SCOPED_TRACE(std::to_string(ranks) + " ranks, trial " + std::to_string(trial) + ": " + std::to_string(count) +
                         " units, max_sequences " + std::to_string(max_sequences));
            // Rates: unknown in the first round, then different per rank and drifting.
            const auto rate = [](int rank, int k) { return k == 0 ? 0.0 : 1.0 + rank + 0.1 * (k % 3); };
            expect_valid_dynamic_rounds(ranks, units, max_sequences, dynamic_rounds(ranks, units, max_sequences, min_rounds, rate));
            // With a grid of chunks to end steps on, too.
            const io::SequenceChunks grid{static_cast<std::int64_t>(rng() % 5), 1 + static_cast<std::int64_t>(rng() % 8)};
            expect_valid_dynamic_rounds(ranks, units, max_sequences,
                                        dynamic_rounds(ranks, units, max_sequences, min_rounds, rate, grid));
            if (HasFailure()) return;
        }
    }
}

// As static steps (StaticRounds.StepsEndOnChunkBoundsWithinOneChunk): a step of whole sequences
// past its size goes on to the next chunk bound within one chunk, where it is at least four
// chunks long, so that its whole chunks go around HDF5.
TEST(DynamicScheduler, StepsEndOnChunkBoundsWithinOneChunk) {
    std::vector<Unit> units;
    for (std::int64_t s = 0; s < 2000; ++s) units.push_back(Unit{s, s + 1, 1.0, 1});
    const auto rate = [](int, int) { return 1.0; };
    const auto plain = dynamic_rounds(2, units, 2000, 8, rate);
    const auto all = dynamic_rounds(2, units, 2000, 8, rate, io::SequenceChunks{0, 16});
    expect_valid_dynamic_rounds(2, units, 2000, all);
    int long_steps = 0, off_grid_without = 0;
    for (const Round& round : all[0]) {
        for (const RankStep& step : round) {
            if (step.last - step.first < 4 * 16 + 16 || step.last == 2000) continue;  // too short, or the end
            ++long_steps;
            EXPECT_EQ(step.last % 16, 0) << "a step of " << step.last - step.first << " ends at " << step.last;
        }
    }
    for (const Round& round : plain[0]) {
        for (const RankStep& step : round) {
            if (step.last - step.first >= 4 * 16 + 16 && step.last != 2000 && step.last % 16 != 0) ++off_grid_without;
        }
    }
    EXPECT_GT(long_steps, 4);
    EXPECT_GT(off_grid_without, 0) << "the case must need the grid";
}

TEST(DynamicScheduler, UnknownRatesKeepHandingOutWork) {
    // A rank that has not computed yet reports 0: the round is decided as for equal speeds.
    std::mt19937_64 rng(12);
    const std::vector<Unit> units = random_units(300, 3, rng);
    const auto rate = [](int rank, int k) { return rank == 1 ? 0.0 : 1.0 + k; };
    expect_valid_dynamic_rounds(3, units, 8, dynamic_rounds(3, units, 8, 8, rate));
}

TEST(DynamicScheduler, RespectsMaxSequencesWithCheapUnits) {
    // Zero-cost units would all fit any cost target: the memory bound must still cut them.
    std::vector<Unit> units;
    for (std::int64_t i = 0; i < 500; ++i) units.push_back(Unit{2 * i, 2 * i + 2, 0.0, 0});
    const auto rate = [](int, int) { return 1.0; };
    for (const int ranks : {1, 2, 3}) {
        const auto all = dynamic_rounds(ranks, units, 7, 8, rate);
        expect_valid_dynamic_rounds(ranks, units, 7, all);
        for (const Round& round : all[0]) {
            for (const RankStep& step : round) EXPECT_LE(step.unit_count, 3);
        }
    }
}

TEST(DynamicScheduler, AFasterRankGetsProportionallyCostlierSteps) {
    // 40000 equal one-sequence units: fine enough that the steps' costs follow the targets.
    std::vector<Unit> units;
    for (std::int64_t i = 0; i < 40000; ++i) units.push_back(Unit{i, i + 1, 1.0, 1});
    for (const int ranks : {2, 4}) {
        for (const int fast : {0, ranks - 1}) {
            SCOPED_TRACE(std::to_string(ranks) + " ranks, rank " + std::to_string(fast) + " 4x faster");
            const auto rate = [fast](int rank, int k) { return k == 0 ? 0.0 : rank == fast ? 4.0e9 : 1.0e9; };
            const auto all = dynamic_rounds(ranks, units, 1 << 30, 8, rate);
            expect_valid_dynamic_rounds(ranks, units, 1 << 30, all);
            int compared = 0;
            const std::vector<Round>& rounds = all[0];
            for (std::size_t k = 1; k < rounds.size(); ++k) {
                const RankStep& quick = rounds[k][static_cast<std::size_t>(fast)];
                for (int r = 0; r < ranks; ++r) {
                    const RankStep& slow = rounds[k][static_cast<std::size_t>(r)];
                    if (r == fast || quick.empty() || slow.empty()) continue;
                    if (slow.unit_count < 40) continue;  // the tail: whole units, no proportions
                    const double ratio = quick.cost / slow.cost;
                    EXPECT_GT(ratio, 3.6) << "round " << k << " rank " << r;
                    EXPECT_LT(ratio, 4.4) << "round " << k << " rank " << r;
                    ++compared;
                }
            }
            EXPECT_GE(compared, 4);
            // Round 0 (rates unknown): equal steps.
            const Round& first = rounds[0];
            for (const RankStep& step : first) EXPECT_DOUBLE_EQ(step.cost, first[0].cost);
        }
    }
}

TEST(DynamicScheduler, EqualRatesGiveEqualStepsWithinARound) {
    // Half of the remaining work spread evenly: no rank's step depends on its place in the round.
    std::vector<Unit> units;
    for (std::int64_t i = 0; i < 40000; ++i) units.push_back(Unit{i, i + 1, 1.0, 1});
    const auto rate = [](int, int k) { return k == 0 ? 0.0 : 2.0e9; };
    const auto all = dynamic_rounds(4, units, 1 << 30, 8, rate);
    expect_valid_dynamic_rounds(4, units, 1 << 30, all);
    for (const Round& round : all[0]) {
        if (round_is_empty(round) || round[3].unit_count < 40) continue;
        for (const RankStep& step : round) {
            EXPECT_NEAR(step.cost, round[0].cost, 0.02 * round[0].cost) << "round of " << round[0].cost;
        }
    }
}

}  // namespace
}  // namespace attnbatch::distributed

namespace attnbatch::distributed {
namespace {

// What a resumed run plans: the units not yet done, so neighbours in the vector may be far
// apart in the file. No step may span such a gap (its sequences would include done ones).
std::vector<Unit> units_with_gaps(std::mt19937_64& rng) {
    std::vector<Unit> all = random_units(300, 4, rng), pending;
    for (const Unit& unit : all) {
        if (rng() % 3 != 0) pending.push_back(unit);
    }
    return pending;
}

void expect_no_step_spans_a_gap(const std::vector<Unit>& units, const RankStep& step) {
    for (std::int64_t u = step.first_unit + 1; u < step.first_unit + step.unit_count; ++u) {
        EXPECT_EQ(units[static_cast<std::size_t>(u - 1)].last, units[static_cast<std::size_t>(u)].first)
            << "a step over units " << step.first_unit << ".." << step.first_unit + step.unit_count - 1 << " spans a gap";
    }
}

TEST(ResumedUnits, StaticStepsNeverSpanAGap) {
    std::mt19937_64 rng(17);
    for (int ranks : {1, 2, 5}) {
        const std::vector<Unit> units = units_with_gaps(rng);
        const Plan plan = plan_static(units, ranks, StaticStrategy::contiguous);
        std::int64_t covered = 0;
        for (const Round& round : static_rounds(units, plan, 64, 8)) {
            for (const RankStep& step : round) {
                if (step.empty()) continue;
                expect_step_matches_units(units, step);
                expect_no_step_spans_a_gap(units, step);
                covered += step.unit_count;
            }
        }
        EXPECT_EQ(covered, static_cast<std::int64_t>(units.size()));
    }
}

TEST(ResumedUnits, DynamicStepsNeverSpanAGap) {
    std::mt19937_64 rng(23);
    const std::vector<Unit> units = units_with_gaps(rng);
    const auto all = dynamic_rounds(3, units, 64, 8, [](int rank, int) { return 1.0 + rank; });
    std::int64_t covered = 0;
    for (const Round& round : all[0]) {
        for (const RankStep& step : round) {
            if (step.empty()) continue;
            expect_no_step_spans_a_gap(units, step);
            covered += step.unit_count;
        }
    }
    EXPECT_EQ(covered, static_cast<std::int64_t>(units.size()));
}

TEST(ResumedUnits, UnitsWithBoundsCostWhatFormUnitsCosts) {
    CostModel model;
    model.d_k = model.d_v = 8;
    const std::vector<std::int32_t> lengths{5, 0, 7, 7, 1, 3};
    const std::vector<Unit> formed = form_units(lengths, model, 2);
    std::vector<std::int64_t> bounds{0};
    for (const Unit& unit : formed) bounds.push_back(unit.last);
    const std::vector<Unit> again = units_with_bounds(lengths, model, bounds);
    ASSERT_EQ(again.size(), formed.size());
    for (std::size_t u = 0; u < formed.size(); ++u) {
        EXPECT_EQ(again[u].first, formed[u].first);
        EXPECT_EQ(again[u].last, formed[u].last);
        EXPECT_EQ(again[u].cost, formed[u].cost);
        EXPECT_EQ(again[u].tokens, formed[u].tokens);
    }
    EXPECT_THROW(units_with_bounds(lengths, model, {0, 3, 3, 6}), std::invalid_argument);
    EXPECT_THROW(units_with_bounds(lengths, model, {0, 7}), std::invalid_argument);
}

}  // namespace
}  // namespace attnbatch::distributed
