// A whole `run` job, from describing the input to publishing the output, on one rank or many.
//
//   JobSettings  what the user asked for, typed (no strings left to parse): the cli fills it.
//   prepare_job  collective: rank 0 validates the input and broadcasts what it found, the
//                ranks agree on every failure; then the memory model, the units, the resume
//                state and the plan. Nothing is written.
//   preflight    collective: every other check the run makes before its first write (the
//                output path, its directory, the free space). A dry run is prepare_job and
//                preflight, so it exits with the code the real run would.
//   run_job      collective: preflight, the value scan, the output's creation, the rounds
//                (coordinator.hpp) and the publication of OUTPUT.
//
// Words used the same way everywhere in this layer:
//   unit   the planner's piece of work: sequences [first, last), or a piece (query rows
//          [q0, q1) of one long sequence), costed and journaled as done or not (the resume
//          grain); long sequences are cut into pieces when the ranks or the memory need it;
//   step   what one rank computes in one round: consecutive units of its share merged;
//   round  one collective iteration: every rank computes at most one step while its main
//          thread stores the previous round and fetches the next;
//   plan   which ranks get which units (plan.hpp); the schedule (schedule.hpp) turns it into
//          rounds.
//
// Failures are agreed (agreement.hpp): every rank leaves prepare_job or run_job with the
// same AgreedFailure, and rank 0 reports it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "attnbatch/distributed/comm.hpp"
#include "attnbatch/distributed/coordinator.hpp"
#include "attnbatch/distributed/memory_model.hpp"
#include "attnbatch/distributed/node_resources.hpp"
#include "attnbatch/distributed/phase_times.hpp"
#include "attnbatch/distributed/plan.hpp"
#include "attnbatch/distributed/resume.hpp"
#include "attnbatch/distributed/step_computer.hpp"
#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/io/models/weights_reader.hpp"
#include "attnbatch/io/output/output_file.hpp"
#include "attnbatch/io/output/output_size.hpp"
#include "attnbatch/kernels/attention.hpp"
#include "attnbatch/kernels/attention_spec.hpp"

namespace attnbatch::distributed {

enum class IoMode { automatic, gather, parallel };
enum class ScheduleKind { cost_static, dynamic };

const char* name_of(IoMode mode);        // "auto", "gather", "parallel"
const char* name_of(ScheduleKind kind);  // "static", "dynamic"

struct SequenceRange {
    std::int64_t first = 0, last = 0;  // [first, last); last -1: up to N
};

struct JobSettings {
    io::InputOptions input;
    std::string output;
    kernels::AttentionSpec attention;  // scale 0: 1/sqrt(d_k)
    io::SaveWeights save_weights = io::SaveWeights::all;
    io::WeightsDtype weights_dtype = io::WeightsDtype::f32;
    std::optional<SequenceRange> sequences;          // none: every sequence (run --sequences)
    std::optional<SequenceRange> weights_sequences;  // none: every sequence; input sequence numbers
    int gzip_level = 0;                              // 0: no compression
    IoMode io_mode = IoMode::automatic;
    ScheduleKind schedule = ScheduleKind::cost_static;
    kernels::KernelOptions kernel;    // threads 0: OpenMP's default; its precision is attention.precision's
    std::size_t max_memory = 0;       // resident bytes per rank; 0: default_max_memory() of the node
    std::int64_t unit_sequences = 0;  // 0: as many as max_memory allows
    bool resume = false, force = false, dry_run = false;
    // run --fsync on|off: whether OUTPUT is published only once on the disk (io::OutputFile::
    // set_fsync). Not given: on, or what the .partial a --resume continues recorded.
    std::optional<bool> fsync;
    int simulate_ranks = 0;           // a dry run planned for this many ranks (0: this run's)
    std::string recorded_config;      // the resolved options, recorded in the output
    std::string version;              // recorded in the output
};

// Everything prepare_job found and decided; identical on every rank.
struct Job {
    Comm& comm;
    JobSettings settings;
    double started_at = 0;  // wall clock at prepare_job's start

    io::InputSpec spec;          // narrowed to --sequences (spec.first_sequence, spec.n)
    std::int64_t stored_sequences = 0;  // N of the input file, before --sequences
    std::optional<io::ProjectionWeights> weights;
    std::vector<std::int32_t> lengths;

    io::OutputLayout layout;
    io::OutputSizes sizes;
    AttentionSettings attention;  // scale, threads and precision resolved
    int plan_ranks = 1;           // this run's ranks, or --simulate-ranks
    IoMode io_mode = IoMode::gather;  // resolved
    bool fsync = true;            // resolved (JobSettings::fsync)
    std::int64_t max_sequences = 0;  // per step, from the memory model
    std::uint64_t max_step_bytes = 0;  // a step's data (pieces, packed layout); 0: max_sequences alone
    SplitOptions split;               // how units were cut (pieces of long sequences)
    std::vector<std::string> warnings;  // about the resources (cores, binding), the same on every rank
    std::vector<NodeShare> nodes;       // the nodes the ranks run on, each with its ranks and memory

    std::vector<Unit> all_units;  // the whole job's, as journaled
    std::vector<Unit> units;      // what this attempt computes (all, or those not done)
    RoundProgress done_before;    // what earlier attempts did (--resume)
    Plan plan;                    // static contiguous shares of `units` over plan_ranks
    Plan predicted;               // the plan of the chosen schedule, for printing
    std::string identity;         // the journal's identity of this job
    ResumeState resume;
    std::vector<std::string> notes;  // what the preflight found worth saying; rank 0 prints them
    PhaseTimes phases;               // this rank's, so far (prepare_job's and run_job's phases)

    explicit Job(Comm& c) : comm(c) {}
    bool nothing_to_do() const { return resume.state == ResumeState::complete; }
};

// Collective. Throws AgreedFailure (the same on every rank) on any failure.
Job prepare_job(Comm& comm, const JobSettings& settings);

// Collective, after prepare_job: the checks the real run makes before it writes anything,
// in the order it makes them, changing nothing. OUTPUT must not exist without --force, nor
// OUTPUT.partial without --resume or --force (nor, with --force, be held by another writer);
// the output directory must exist and be writable; the file system must have room for an
// uncompressed output. run_job calls it first, and a dry run calls it instead of run_job, so
// that a dry run exits with the real run's code for everything knowable before the first
// write. Only the value scan (NaN/inf: it reads every byte of the input) is left to run_job.
// Checks of the plan that do not read files (idle ranks, ranks x threads against the cores)
// belong here too. Throws AgreedFailure.
void preflight(Job& job);

struct JobResult {
    RunResult rounds;
    double wall_seconds = 0;  // from prepare_job's start to the output's publication
    RankTimes sum;            // over ranks
    double slowest_compute = 0;
    double imbalance = 0;        // max rank compute / mean - 1
    double io_hidden = 1;        // of all I/O, the fraction done while compute ran
    PhaseTimes phases;           // each phase's time on its slowest rank
    double flops() const { return sum.attention_flops + sum.projection_flops; }
};

// Called on every rank after each round (rounds end together on all ranks).
using RoundCallback = std::function<void(const RoundProgress&)>;

// Collective. Computes `job.units` and publishes OUTPUT. Throws AgreedFailure on a failure
// every rank agreed on (the partial output is closed resumable); a failure inside a
// collective write cannot be agreed on and ends the job with Comm::abort.
JobResult run_job(Job& job, const RoundCallback& on_round = {});

}  // namespace attnbatch::distributed
