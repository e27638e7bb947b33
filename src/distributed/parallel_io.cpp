// --io parallel: every rank reads its own hyperslabs (independent reads of a file opened
// read-only by each rank) and all ranks write the one output with collective MPI-IO writes.
// A failure inside a collective write cannot be agreed on (the other ranks may be inside the
// same collective), so it ends the job with MPI_Abort after printing the reason.
#include "attnbatch/distributed/step_io.hpp"
#include "attnbatch/error.hpp"
#include "attnbatch/io/h5/transfer.hpp"
#include "wall_clock.hpp"

namespace attnbatch::distributed {

namespace {

class ParallelIo final : public StepIo {
public:
    ParallelIo(Comm& comm, std::unique_ptr<io::InputReader> reader, std::unique_ptr<io::OutputFile> output, bool force)
        : comm_(comm), reader_(std::move(reader)), output_(std::move(output)), force_(force) {}

    void fetch(const Round& round, io::InputBlock& block, IoTimes& times, LocalFailure& failure) override {
        const RankStep& mine = round[static_cast<std::size_t>(comm_.rank())];
        block.count = 0;
        block.lengths.clear();
        if (mine.empty() || failure) return;
        const double t0 = wall_seconds();
        record_failure(failure, [&] { read_step(*reader_, mine, block); });
        times.read += wall_seconds() - t0;
    }

    void store(const Round& round, const io::OutputBlock* block, IoTimes& times, LocalFailure&) override {
        const RankStep& mine = round[static_cast<std::size_t>(comm_.rank())];
        const double t0 = wall_seconds();
        static const io::OutputBlock nothing{};
        const bool have = block != nullptr && !mine.empty();
        try {
            // Independent for an uncompressed output (OutputFile::data_transfer()), whose rows
            // then go straight to the file. A collective write funnelled them through MPI-IO's
            // aggregators (two-phase collective buffering): with 2 ranks, N=2048 L=256 with all
            // weights, 1.85 s against 1.46 s (medians of 5, interleaved).
            output_->write_span(have ? span_of(mine) : io::OutputSpan{}, have ? *block : nothing,
                                output_->data_transfer());
            // The journal's write is collective, and HDF5 starts it with an MPI_Allreduce, whose
            // wait polls: a rank done with its rows first spun there while the other still
            // wrote, taking half its core from its own compute thread (N=2048 L=256 with
            // projections and all weights: 0.88 s of CPU in that Allreduce in a 1 s run). The
            // ranks meet first in a barrier that sleeps (Comm's collectives wait patiently).
            meet(times);
            output_->checkpoint(io::Transfer::collective);
        } catch (const std::exception& e) {
            abort_collective(e.what());
        }
        note_fallback();
        times.write += wall_seconds() - t0;
    }

    void finish(IoTimes& times) override {
        const double t0 = wall_seconds();
        double t1 = t0;
        try {
            output_->close_complete();
            times.direct_bytes = static_cast<double>(output_->direct_bytes());
            meet(times);
            t1 = wall_seconds();
            if (comm_.is_root()) io::publish_output(output_->path(), force_, output_->fsync());
        } catch (const std::exception& e) {
            abort_collective(e.what());
        }
        meet(times);  // OUTPUT exists on every rank's return
        const double t2 = wall_seconds();
        times.close += t1 - t0;
        times.publish += t2 - t1;
        times.write += t2 - t0;
    }

    void abandon() override {
        try {
            output_->close_incomplete();
        } catch (const std::exception& e) {
            abort_collective(e.what());
        }
    }

    std::string collective_fallback() const override { return fallback_; }

    void watch_compute(const std::atomic<bool>* computing) override { output_->watch_compute(computing); }

private:
    // A barrier, its wait counted as waiting for the other ranks.
    void meet(IoTimes& times) {
        const double t0 = wall_seconds();
        comm_.barrier();
        times.wait += wall_seconds() - t0;
    }

    [[noreturn]] void abort_collective(const std::string& what) {
        abort_job(comm_, exit_io, what + " (inside a collective write: aborting every rank)");
    }

    void note_fallback() {
        if (fallback_.empty()) fallback_ = io::collective_fallback_cause();
    }

    Comm& comm_;
    std::unique_ptr<io::InputReader> reader_;
    std::unique_ptr<io::OutputFile> output_;
    bool force_;
    std::string fallback_;
};

}  // namespace

void read_step(io::InputReader& reader, const RankStep& step, io::InputBlock& block) {
    if (step.piece()) {
        reader.read_piece(step.first, step.row_first, step.row_last, step.key_rows, block);
    } else {
        reader.read(step.first, step.last, block);
    }
}

std::unique_ptr<StepIo> make_parallel_io(Comm& comm, std::unique_ptr<io::InputReader> reader,
                                         std::unique_ptr<io::OutputFile> output, bool force) {
    return std::make_unique<ParallelIo>(comm, std::move(reader), std::move(output), force);
}

}  // namespace attnbatch::distributed
