// The distributed run: rounds of steps handed out by a Scheduler, each rank computing its
// step on a background thread while its main thread stores the previous round and fetches
// the next one (double buffering), and an agreement after every round so that a failure on
// any rank ends every rank with the same exit code.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "attnbatch/distributed/agreement.hpp"
#include "attnbatch/distributed/comm.hpp"
#include "attnbatch/distributed/phase_times.hpp"
#include "attnbatch/distributed/plan.hpp"
#include "attnbatch/distributed/schedule.hpp"
#include "attnbatch/distributed/step_io.hpp"
#include "attnbatch/distributed/step_computer.hpp"

namespace attnbatch::distributed {

struct RankTimes {
    double wall = 0;          // the rounds, from the first fetch to the end of finish()
    double read = 0, write = 0, communicate = 0;  // on the main thread, overlapping compute
    double compute = 0;       // the compute thread busy
    double idle = 0;          // the compute thread waiting: wall - compute
    std::int64_t units = 0, steps = 0, sequences = 0, tokens = 0;
    double attention_flops = 0, projection_flops = 0;
    double exposed = 0;       // of read + write + communicate, the time compute did not hide
    double direct_bytes = 0;  // of its output bytes, those written past the page cache
    // CPU seconds: its compute threads' while computing, and of them the system's (page
    // faults of fresh memory, mostly); its main thread's over the rounds (reads, writes,
    // checksums, agreements), which share a core with the compute where a rank has one.
    double compute_cpu = 0, compute_system = 0, io_cpu = 0;
    // The main thread waiting for the other ranks: at each round's agreement (on failures and
    // stop signals) and, with --io parallel, at the barriers inside `write`. A rank that waits
    // long is one whose share of the work ran out first: where imbalance costs.
    double wait = 0;
    // The rows of a register tile its avx512 kernel ran with (kernels::row_block: by the CPU's
    // vendor, or ATTNBATCH_AVX512_ROWS); 0 where the backend has no such choice. Per rank: a
    // job's nodes need not share a vendor.
    std::int64_t row_block = 0;
    // Of read + write + communicate, the fraction done while the compute thread was busy.
    double hidden_fraction() const;
    static constexpr int fields = 19;
    std::vector<double> pack() const;
    static RankTimes unpack(const double* values);
};

struct RunResult {
    std::vector<RankTimes> ranks;  // every rank's, on every rank
    std::int64_t rounds = 0;
    std::string collective_fallback;  // why collective writes went independent, if they did
    PhaseTimes phases;  // this rank's: first_read, rounds, last_write, close, publish
};

// Cumulative over every rank, after each round (rounds end together on all ranks).
struct RoundProgress {
    std::int64_t rounds = 0, units = 0, sequences = 0;
    double cost = 0;  // predicted flops of the units done
};

struct RunContext {
    const io::InputSpec& spec;
    const std::optional<io::ProjectionWeights>& weights;
    const AttentionSettings& settings;
    const io::OutputLayout& layout;
    std::function<void(const RoundProgress&)> on_round = {};  // called on every rank
};

// Collective. Runs every round and completes the output. A failure every rank agreed on
// closes OUTPUT.partial incomplete and throws AgreedFailure on every rank.
RunResult run_rounds(Comm& comm, const RunContext& context, Scheduler& scheduler, StepIo& step_io);

}  // namespace attnbatch::distributed
