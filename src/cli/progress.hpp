// Progress of a run as rounds complete: on a terminal a live bar (units, sequences/s,
// GFLOP/s, ETA) rewritten in place on stderr; in a batch log one plain line every
// --progress-interval seconds on stdout.
#pragma once

#include <cstdint>
#include <string>

#include "attnbatch/distributed/coordinator.hpp"

namespace attnbatch::cli {

class ProgressReporter {
public:
    // mode: auto|always|never (see run --help); `label` prefixes lines ("rank 2" with --verbose).
    ProgressReporter(const std::string& mode, double interval_seconds, std::int64_t units, std::int64_t sequences,
                     double cost, std::string label);
    // The work earlier attempts did (--resume): counted as done, not in the rates.
    void resumed_from(const distributed::RoundProgress& done) { before_ = done; }
    void update(const distributed::RoundProgress& progress);
    ~ProgressReporter() { finish(); }
    ProgressReporter(const ProgressReporter&) = delete;
    ProgressReporter& operator=(const ProgressReporter&) = delete;
    void finish();  // ends the bar's line

private:
    std::string line(const distributed::RoundProgress& progress, double elapsed) const;
    bool bar_ = false, enabled_ = false;
    double interval_, start_, last_shown_ = -1e300;
    std::int64_t units_, sequences_;
    double cost_;
    std::string label_;
    distributed::RoundProgress before_;
    bool drawn_ = false;
};

}  // namespace attnbatch::cli
