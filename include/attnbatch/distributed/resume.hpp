// `run --resume`: deciding, on rank 0, whether there is a partial output to continue and
// what of it is done; then every rank takes over its units.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attnbatch/distributed/comm.hpp"
#include "attnbatch/distributed/plan.hpp"
#include "attnbatch/io/output/journal.hpp"
#include "attnbatch/io/output/output_file.hpp"

namespace attnbatch::distributed {

struct ResumeState {
    enum State : std::int64_t { fresh = 0, partial = 1, complete = 2 };
    std::int64_t state = fresh;
    std::vector<std::int64_t> unit_bounds;  // the partial run's units (io/output/journal.hpp positions)
    std::vector<std::int64_t> unit_rows;    // empty when none is a piece
    std::vector<std::int64_t> done;         // 1 where done and its checksum still matches
    std::string summary;                    // one line for the user, rank 0 only ("" when fresh without --resume)
    std::int64_t recorded_fsync = -1;       // the partial run's --fsync: 1 on, 0 off, -1 not recorded
};

// Rank 0's look at what a --resume continues, in slices: the re-reading of every done unit
// is the one part that grows with the output (minutes at scale), so it goes a bounded
// number of bytes at a time and the ranks can agree on a stop in between (stop_point.hpp).
class ResumeInspection {
public:
    // Decides at once: complete when OUTPUT exists (and force does not ask to finish a
    // .partial beside it) and was made with the same `identity`; partial when OUTPUT.partial
    // exists and was written with the same `identity`, its journal read; fresh otherwise.
    // Either file made with another identity is an Error (exit 2) naming what differs, and
    // nothing is changed. A .partial shorter than the end its superblock records (a write
    // limit or a crash cut it) is first extended with zeros to that end, so that HDF5 opens it
    // and the checks find the units whose bytes were lost. `dry_run`: the .partial is opened
    // read-only and its checksums are left to the real run (re-reading them reads every unit
    // done); a short one is left as it is and unread (HDF5 cannot open it), its journal
    // unknown: partial with no unit_bounds, the summary saying what the run would do.
    ResumeInspection(const std::string& output, bool force, const io::OutputLayout& layout, const std::string& identity,
                     bool dry_run = false);
    ~ResumeInspection();
    ResumeInspection(const ResumeInspection&) = delete;
    ResumeInspection& operator=(const ResumeInspection&) = delete;

    // Re-reads the next done units, about `bytes` of their data (at least one unit), and
    // checks their checksums. True once every done unit is checked.
    bool verify_some(std::uint64_t bytes);
    // What was found, once verify_some() returned true: units failing their checksum are
    // not done.
    ResumeState result() const;

private:
    ResumeState resume_;
    io::OutputLayout layout_;
    std::unique_ptr<io::OutputFile> file_;  // the partial output, while it is being checked
    io::JournalState journal_;
    bool dry_run_ = false;
    std::size_t next_unit_ = 0;
    std::vector<std::int64_t> failing_;
    io::OutputFile::ChunksReadBack read_back_;  // the chunks the checks read: no need to read them again
    std::size_t reset_chunks_ = 0;
    std::uint64_t extended_bytes_ = 0;  // zeros added to reach the recorded end of the file
};

// All of ResumeInspection at once (rank 0).
ResumeState inspect_for_resume(const std::string& output, bool force, const io::OutputLayout& layout,
                               const std::string& identity, bool dry_run = false);

// Collective: rank 0's state reaches every rank (the summary stays on rank 0).
void broadcast_resume(Comm& comm, ResumeState& resume);

// The partial run's units, costed for this run; Error (exit 2) when one of them holds
// more sequences, or more data, than this run's memory bound allows in a step.
std::vector<Unit> resumed_units(const std::vector<std::int32_t>& lengths, const CostModel& cost,
                                const ResumeState& resume, std::int64_t max_sequences, const SplitOptions& split = {});

}  // namespace attnbatch::distributed
