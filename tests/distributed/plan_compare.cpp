// Compares the static contiguous, static LPT and dynamic schedules on 10^7 sequences: the
// imbalance (max rank cost / mean - 1) and the planning CPU time, for several length
// distributions and rank counts. A measurement for the lead, not a test: run by hand.
//
//   attnbatch_plan_compare [--quick] [--n N] [--max-sequences M] [--ranks P] [--causal] [--projected]
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "attnbatch/distributed/plan.hpp"
#include "support/length_distributions.hpp"

namespace {

using namespace attnbatch::distributed;
namespace testing = attnbatch::testing;
// Process CPU time rather than wall time: the comparison is meant to run on a shared machine.
struct Clock {
    using time_point = std::clock_t;
    static time_point now() { return std::clock(); }
};

double seconds_since(Clock::time_point start) {
    return static_cast<double>(Clock::now() - start) / CLOCKS_PER_SEC;
}

struct Distribution {
    std::string name;
    std::function<std::vector<std::int32_t>(std::int64_t)> make;
};

}  // namespace

int main(int argc, char** argv) {
    std::int64_t n = 10'000'000, max_sequences = 1024;
    bool quick = false;
    std::vector<int> rank_counts = {2, 4, 64, 1024, 4096};
    CostModel model;
    model.heads = 1;
    model.d_k = model.d_v = 64;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--quick")) quick = true;
        else if (!std::strcmp(argv[i], "--n") && i + 1 < argc) n = std::atoll(argv[++i]);
        else if (!std::strcmp(argv[i], "--max-sequences") && i + 1 < argc) max_sequences = std::atoll(argv[++i]);
        else if (!std::strcmp(argv[i], "--ranks") && i + 1 < argc) rank_counts = {std::atoi(argv[++i])};
        else if (!std::strcmp(argv[i], "--causal")) model.causal = true;
        else if (!std::strcmp(argv[i], "--projected")) model.d_in = 64;
        else {
            std::fprintf(stderr, "usage: %s [--quick] [--n N] [--max-sequences M] [--ranks P] [--causal] [--projected]\n", argv[0]);
            return 2;
        }
    }
    std::vector<Distribution> distributions = {
        {"zipf1.1", [](std::int64_t count) { return testing::zipf_lengths(count, 512, 1.1, 1); }},
        {"zipf1.2", [](std::int64_t count) { return testing::zipf_lengths(count, 512, 1.2, 1); }},
        {"zipf1.5", [](std::int64_t count) { return testing::zipf_lengths(count, 512, 1.5, 1); }},
        {"uniform", [](std::int64_t count) { return testing::uniform_lengths(count, 1, 512, 1); }},
        {"const512", [](std::int64_t count) { return std::vector<std::int32_t>(static_cast<std::size_t>(count), 512); }},
    };
    if (quick) distributions.resize(2);

    std::printf("N=%lld max_sequences=%lld H=%lld d_k=d_v=%lld d_in=%lld causal=%d granularity=%lld\n",
                static_cast<long long>(n), static_cast<long long>(max_sequences), static_cast<long long>(model.heads),
                static_cast<long long>(model.d_k), static_cast<long long>(model.d_in), model.causal ? 1 : 0,
                static_cast<long long>(kPlanGranularity));
    // floor%: max(costliest unit, mean) / mean - 1, below which no schedule of these units goes.
    std::printf("%-9s %8s %6s %9s %8s | %-22s | %-22s | %-22s\n", "lengths", "units", "P", "form_s", "floor%",
                "contiguous imb%  time", "lpt imb%  time", "dynamic imb%  time");
    for (const Distribution& distribution : distributions) {
        const auto lengths = distribution.make(n);
        auto start = Clock::now();
        const auto units = form_units(lengths, model, max_sequences);
        const double form_s = seconds_since(start);
        double total = 0, costliest = 0;
        for (const Unit& unit : units) {
            total += unit.cost;
            costliest = std::max(costliest, unit.cost);
        }
        for (const int ranks : rank_counts) {
            double imbalance[3], time[3];
            for (int which = 0; which < 3; ++which) {
                start = Clock::now();
                const Plan plan = which == 0   ? plan_static(units, ranks, StaticStrategy::contiguous)
                                  : which == 1 ? plan_static(units, ranks, StaticStrategy::lpt)
                                               : simulate_dynamic(units, ranks);
                time[which] = seconds_since(start);
                imbalance[which] = 100 * plan.imbalance;
            }
            const double floor = 100 * std::max(0.0, costliest / (total / ranks) - 1);
            std::printf("%-9s %8zu %6d %9.3f %8.4f | %12.4f %8.3f | %12.4f %8.3f | %12.4f %8.3f\n",
                        distribution.name.c_str(), units.size(), ranks, form_s, floor, imbalance[0], time[0], imbalance[1],
                        time[1], imbalance[2], time[2]);
            std::fflush(stdout);
        }
    }
    return 0;
}
