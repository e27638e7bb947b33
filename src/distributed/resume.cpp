#include "attnbatch/distributed/resume.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>

#include "attnbatch/distributed/memory_model.hpp"
#include "attnbatch/error.hpp"
#include "attnbatch/io/output/journal.hpp"
#include "attnbatch/io/output/truncated_partial.hpp"

namespace attnbatch::distributed {
namespace {

bool exists(const std::string& path) {
    struct stat status {};
    return ::lstat(path.c_str(), &status) == 0;
}

// A complete OUTPUT is this job's result only when its journal (kept in the published file)
// records the identity this run would record: a requeued job whose options were edited must
// not keep the old results.
void expect_complete_output_of_this_job(const std::string& output, const std::string& identity) {
    const std::optional<std::string> recorded = io::read_output_identity(output);
    if (!recorded) {
        throw Error(exit_usage, output + " exists but records no input and options to compare (no /journal/identity: "
                                         "an output of an older version), so --resume cannot tell whether it is this "
                                         "job's result; hint: attnbatch verify checks it, or drop --resume and add --force "
                                         "to compute it again");
    }
    const std::string differences = io::identity_differences(*recorded, identity);
    if (!differences.empty()) {
        throw Error(exit_usage, output + " is complete but was written from other input or options (" + differences +
                                    "); hint: resume with the original ones, or drop --resume and add --force to "
                                    "replace it");
    }
}

// The --fsync the partial run recorded (1 on, 0 off), -1 when it recorded none (an older
// version) or its configuration cannot be read: the resumed run then takes its own.
std::int64_t recorded_fsync(const io::OutputFile& file) {
    try {
        const std::map<std::string, std::string> recorded = file.recorded_options();
        const auto fsync = recorded.find("fsync");
        if (fsync == recorded.end()) return -1;
        return fsync->second == "off" ? 0 : 1;
    } catch (const Error&) {
        return -1;
    }
}

}  // namespace

ResumeInspection::ResumeInspection(const std::string& output, bool force, const io::OutputLayout& layout,
                                   const std::string& identity, bool dry_run)
    : layout_(layout), dry_run_(dry_run) {
    const std::string partial = io::partial_path_for(output);
    const bool have_partial = exists(partial);
    if (exists(output) && !(have_partial && force)) {
        expect_complete_output_of_this_job(output, identity);
        resume_.summary = output + " is already complete (same input and options); nothing to resume";
        resume_.state = ResumeState::complete;
        return;
    }
    if (!have_partial) {
        resume_.summary = "resume: no " + partial + " to continue; starting afresh";
        return;
    }
    if (dry_run) {
        const std::uint64_t missing = io::bytes_short_of_recorded_end(partial);
        if (missing > 0) {
            // HDF5 refuses to open it as it is, and a dry run changes nothing: what the
            // journal holds stays unknown, and the real run decides.
            resume_.state = ResumeState::partial;
            resume_.summary = "resume: " + partial + " is " + std::to_string(missing) +
                              " bytes short of its recorded end (a write limit or a crash); the run would extend it "
                              "with zeros, then read its journal and check every unit done (a dry run does neither)";
            return;
        }
    } else {
        extended_bytes_ = io::extend_to_recorded_end(partial);
    }
    try {
        const std::string differences = io::identity_differences(io::read_journal_identity(partial), identity);
        if (!differences.empty()) {
            throw Error(exit_usage, partial + " was written from other input or options (" + differences +
                                        "); hint: resume with the original ones, or --force to start afresh");
        }
        file_ = std::make_unique<io::OutputFile>(
            io::OutputFile::reopen(output, layout, {}, dry_run ? io::FileMode::read_only : io::FileMode::read_write));
    } catch (const Error&) {
        io::undo_extension(partial, extended_bytes_);  // a refused file stays as it was found
        throw;
    }
    journal_ = file_->journal_state();
    resume_.recorded_fsync = recorded_fsync(*file_);
    resume_.state = ResumeState::partial;
    resume_.unit_bounds = journal_.plan.unit_bounds;
    resume_.unit_rows = journal_.plan.unit_rows;
    resume_.done = journal_.done;
    if (dry_run) file_.reset();
}

ResumeInspection::~ResumeInspection() = default;

bool ResumeInspection::verify_some(std::uint64_t bytes) {
    if (!file_) return true;
    const std::size_t units = journal_.done.size();
    // A token's bytes in /output and /lse; a packed unit holds its sequences' own tokens, a
    // padded one L per sequence (sizing packed units by L made heavy-tailed sets re-read a
    // few short sequences per slice).
    const std::uint64_t token = static_cast<std::uint64_t>(layout_.d_out + layout_.heads) * 4;
    const auto tokens_of = [&](std::int64_t first, std::int64_t end) {
        std::uint64_t rows = 0;
        for (std::int64_t sequence = first; sequence < end; ++sequence) rows += static_cast<std::uint64_t>(layout_.rows_of(sequence));
        return rows;
    };
    const std::uint64_t map = static_cast<std::uint64_t>(layout_.weights_heads()) * static_cast<std::uint64_t>(layout_.len) *
                              static_cast<std::uint64_t>(layout_.len) * layout_.weights_element_bytes();
    std::size_t last = next_unit_;
    std::uint64_t taken = 0;
    while (last < units && (last == next_unit_ || taken < bytes)) {
        const std::int64_t first = resume_.unit_bounds[last], end = resume_.unit_bounds[last + 1];
        const auto [w_begin, w_end] = layout_.weights_range(first, end);
        if (journal_.done[last]) {
            taken += tokens_of(first, end) * token + static_cast<std::uint64_t>(end - first) * 4 +
                     static_cast<std::uint64_t>(w_end - w_begin) * map;
        }
        ++last;
    }
    const std::vector<std::int64_t> failing = file_->units_failing_checksum(journal_, next_unit_, last, &read_back_);
    failing_.insert(failing_.end(), failing.begin(), failing.end());
    next_unit_ = last;
    if (next_unit_ < units) return false;
    // Compressed chunks a crash left unreadable would make every rewrite of their units fail
    // (datasets without filters are left alone by the reset itself).
    reset_chunks_ = file_->reset_unreadable_chunks(read_back_);
    file_.reset();  // closed before the run reopens it
    return true;
}

ResumeState ResumeInspection::result() const {
    ResumeState resume = resume_;
    if (resume.state != ResumeState::partial || resume.unit_bounds.empty()) return resume;
    const std::int64_t units = static_cast<std::int64_t>(journal_.done.size());
    if (dry_run_) {
        resume.summary = "resume: " + std::to_string(journal_.done_units()) + " of " + std::to_string(units) +
                         " units done (their checksums are re-read by the real run, not by a dry run)";
        return resume;
    }
    for (std::int64_t u : failing_) resume.done[static_cast<std::size_t>(u)] = 0;
    std::ostringstream summary;
    summary << "resume: " << journal_.done_units() - static_cast<std::int64_t>(failing_.size()) << " of " << units
            << " units done and verified";
    if (!failing_.empty()) {
        summary << "; " << failing_.size() << " failed their checksum (first: unit " << failing_.front()
                << ", sequences [" << resume.unit_bounds[static_cast<std::size_t>(failing_.front())] << ", "
                << resume.unit_bounds[static_cast<std::size_t>(failing_.front()) + 1] << ")) and are computed again";
    }
    if (reset_chunks_ > 0) {
        summary << "; " << reset_chunks_ << (reset_chunks_ == 1 ? " compressed chunk" : " compressed chunks")
                << " could not be read and " << (reset_chunks_ == 1 ? "was" : "were") << " reset";
    }
    if (extended_bytes_ > 0) {
        summary << "; the file was " << extended_bytes_
                << " bytes short of its recorded end (a write limit or a crash) and was extended with zeros";
    }
    resume.summary = summary.str();
    return resume;
}

ResumeState inspect_for_resume(const std::string& output, bool force, const io::OutputLayout& layout,
                               const std::string& identity, bool dry_run) {
    ResumeInspection inspection(output, force, layout, identity, dry_run);
    while (!inspection.verify_some(std::uint64_t{1} << 30)) {
    }
    return inspection.result();
}

void broadcast_resume(Comm& comm, ResumeState& resume) {
    comm.broadcast(&resume.state, sizeof resume.state, 0);
    comm.broadcast(&resume.recorded_fsync, sizeof resume.recorded_fsync, 0);
    broadcast_vector(comm, resume.unit_bounds, 0);
    broadcast_vector(comm, resume.unit_rows, 0);
    broadcast_vector(comm, resume.done, 0);
}

std::vector<Unit> resumed_units(const std::vector<std::int32_t>& lengths, const CostModel& cost,
                                const ResumeState& resume, std::int64_t max_sequences, const SplitOptions& split) {
    std::vector<Unit> units;
    try {
        units = units_with_positions(lengths, cost, resume.unit_bounds, resume.unit_rows, split);
    } catch (const std::invalid_argument& error) {
        throw Error(exit_io, std::string("--resume: the partial output's journal does not describe this input's "
                                         "sequences (") + error.what() + "); hint: --force starts afresh");
    }
    std::int64_t largest = 0;
    std::uint64_t most_bytes = 0;
    for (const Unit& unit : units) {
        if (!unit.piece()) largest = std::max(largest, unit.last - unit.first);
        most_bytes = std::max(most_bytes, unit.bytes);
    }
    const std::string hint = "; hint: resume with the --max-memory (and --io) of the first attempt, or more";
    if (largest > max_sequences) {
        throw Error(exit_usage, "--resume: the partial output's units hold up to " + std::to_string(largest) +
                                    " sequences, but --max-memory allows " + std::to_string(max_sequences) +
                                    " per step on this run" + hint);
    }
    if (split.memory.budget > 0 && most_bytes > split.memory.budget) {
        throw Error(exit_usage, "--resume: the partial output's units need up to " +
                                    format_bytes(static_cast<double>(most_bytes)) + " each, but --max-memory leaves " +
                                    format_bytes(static_cast<double>(split.memory.budget)) + " per step on this run" + hint);
    }
    return units;
}

}  // namespace attnbatch::distributed
