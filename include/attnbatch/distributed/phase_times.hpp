// Where a run's wall time goes, phase by phase: the start-up before the first compute can
// begin and the shut-down after the last one ends weigh as much as the rounds on small jobs,
// so the --report breaks them down (docs/commands.md "What `run` prints").
//
// Each rank times its own phases; the job reports the slowest rank's time for each (the one
// every rank waits for, as most phases end in a collective).
#pragma once

#include <cstddef>
#include <vector>

namespace attnbatch::distributed {

struct PhaseTimes {
    double describe = 0;         // rank 0: the output path, the input's shapes and types, the weights; broadcast
    double lengths = 0;          // rank 0: /lengths; broadcast
    double plan = 0;             // layout, memory model, units, resume inspection, plan
    double preflight = 0;        // output target and free space
    double value_scan = 0;       // NaN/inf checked before the output is created (the weights alone when the reads check the data)
    double output_creation = 0;  // OUTPUT.partial created (datasets allocated) or reopened
    double first_read = 0;       // the first round's input, read before any compute can start
    double rounds = 0;           // computing, with the I/O of the other rounds behind it
    double last_write = 0;       // the last round's results, written and recorded after the last compute
    double close = 0;            // complete = 1, the final flush and close
    double publish = 0;          // fsync, rename to OUTPUT, fsync of the directory

    static constexpr std::size_t fields = 11;
    std::vector<double> pack() const;
    static PhaseTimes unpack(const double* values);
    // Field by field, the larger.
    static PhaseTimes slowest(const PhaseTimes& a, const PhaseTimes& b);
    double before_rounds() const { return describe + lengths + plan + preflight + value_scan + output_creation + first_read; }
    double after_rounds() const { return last_write + close + publish; }
};

}  // namespace attnbatch::distributed
