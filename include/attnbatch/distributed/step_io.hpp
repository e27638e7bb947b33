// Where a rank's steps come from and where their results go, in the two --io modes:
//   gather    rank 0 reads every rank's input and sends it, receives every rank's results
//             and writes them (serial HDF5 is enough; other ranks never open a file);
//   parallel  every rank reads its own sequences and all ranks write the one output file
//             with collective MPI-IO writes (a rank without a step joins with an empty one).
// Both are collective per round: every rank calls fetch() and store() once per round.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "attnbatch/distributed/agreement.hpp"
#include "attnbatch/distributed/comm.hpp"
#include "attnbatch/distributed/schedule.hpp"
#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/io/output/output_file.hpp"

namespace attnbatch::distributed {

struct IoTimes {
    double read = 0, write = 0, communicate = 0;
    // Of `write`, finish()'s two parts: complete = 1 and close; fsync and rename (rank 0).
    double close = 0, publish = 0;
    // Of `write`, the time spent at the ranks' meeting points (the barrier before each round's
    // collective journal record, and those around publication): waiting for the other ranks.
    double wait = 0;
    // Bytes of the output this process wrote past the page cache (OutputFile::direct_bytes),
    // known after finish().
    double direct_bytes = 0;
};

// What a step writes: its sequences, or its piece's rows.
inline io::OutputSpan span_of(const RankStep& step) {
    return step.empty() ? io::OutputSpan{} : io::OutputSpan{step.first, step.last, step.row_first, step.row_last};
}

// Reads a step's input (a piece: its rows and keys).
void read_step(io::InputReader& reader, const RankStep& step, io::InputBlock& block);

class StepIo {
public:
    virtual ~StepIo() = default;
    // Fills `block` with this rank's step of `round` (left empty when the step is).
    virtual void fetch(const Round& round, io::InputBlock& block, IoTimes& times, LocalFailure& failure) = 0;
    // Stores this rank's results of `round`; `block` is null when this rank has none (its
    // step was empty or failed).
    virtual void store(const Round& round, const io::OutputBlock* block, IoTimes& times, LocalFailure& failure) = 0;
    // complete = 1, close, and publish OUTPUT.partial as OUTPUT (one rank renames).
    virtual void finish(IoTimes& times) = 0;
    // Closes OUTPUT.partial incomplete (resumable) after a failure every rank agreed on.
    virtual void abandon() = 0;
    // Why collective writes fell back to independent ones, if they ever did ("" if not).
    virtual std::string collective_fallback() const { return {}; }
    // True while this rank's compute runs (io::OutputFile::watch_compute); null: unwatched.
    virtual void watch_compute(const std::atomic<bool>* computing) { (void)computing; }
};

// `reader` and `output` exist on rank 0 only (null elsewhere).
std::unique_ptr<StepIo> make_gather_io(Comm& comm, const io::InputSpec& spec, const io::OutputLayout& layout,
                                       std::unique_ptr<io::InputReader> reader, std::unique_ptr<io::OutputFile> output);

// Every rank has its reader and the collectively created output.
std::unique_ptr<StepIo> make_parallel_io(Comm& comm, std::unique_ptr<io::InputReader> reader,
                                         std::unique_ptr<io::OutputFile> output, bool force);

}  // namespace attnbatch::distributed
