#include "attnbatch/distributed/resume.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <sstream>

#include "attnbatch/error.hpp"
#include "attnbatch/io/journal.hpp"

namespace attnbatch::distributed {
namespace {

bool exists(const std::string& path) {
    struct stat status {};
    return ::lstat(path.c_str(), &status) == 0;
}

}  // namespace

ResumeInspection::ResumeInspection(const std::string& output, bool force, const io::OutputLayout& layout,
                                   const std::string& identity)
    : layout_(layout) {
    const std::string partial = io::OutputFile::partial_path_for(output);
    const bool have_partial = exists(partial);
    if (exists(output) && !(have_partial && force)) {
        resume_.summary = output + " is already complete; nothing to resume";
        resume_.state = ResumeState::complete;
        return;
    }
    if (!have_partial) {
        resume_.summary = "resume: no " + partial + " to continue; starting afresh";
        return;
    }
    const std::string differences = io::identity_differences(io::read_journal_identity(partial), identity);
    if (!differences.empty()) {
        throw Error(exit_usage, partial + " was written from other input or options (" + differences +
                                    "); hint: resume with the original ones, or --force to start afresh");
    }
    file_ = std::make_unique<io::OutputFile>(io::OutputFile::reopen(output, layout));
    journal_ = file_->journal_state();
    resume_.state = ResumeState::partial;
    resume_.unit_bounds = journal_.plan.unit_bounds;
    resume_.done = journal_.done;
}

ResumeInspection::~ResumeInspection() = default;

bool ResumeInspection::verify_some(std::uint64_t bytes) {
    if (!file_) return true;
    const std::size_t units = journal_.done.size();
    const std::uint64_t row = static_cast<std::uint64_t>(layout_.len) *
                              static_cast<std::uint64_t>(layout_.d_out + layout_.heads) * 4 + 4;
    const std::uint64_t map = static_cast<std::uint64_t>(layout_.weights_heads()) * static_cast<std::uint64_t>(layout_.len) *
                              static_cast<std::uint64_t>(layout_.len) * (layout_.weights_dtype == io::WeightsDtype::f16 ? 2 : 4);
    std::size_t last = next_unit_;
    std::uint64_t taken = 0;
    while (last < units && (last == next_unit_ || taken < bytes)) {
        const std::int64_t first = resume_.unit_bounds[last], end = resume_.unit_bounds[last + 1];
        const auto [w_begin, w_end] = layout_.weights_range(first, end);
        if (journal_.done[last]) {
            taken += static_cast<std::uint64_t>(end - first) * row + static_cast<std::uint64_t>(w_end - w_begin) * map;
        }
        ++last;
    }
    const std::vector<std::int64_t> failing = file_->units_failing_checksum(journal_, next_unit_, last);
    failing_.insert(failing_.end(), failing.begin(), failing.end());
    next_unit_ = last;
    if (next_unit_ < units) return false;
    file_.reset();  // closed before the run reopens it
    return true;
}

ResumeState ResumeInspection::result() const {
    ResumeState resume = resume_;
    if (resume.state != ResumeState::partial) return resume;
    for (std::int64_t u : failing_) resume.done[static_cast<std::size_t>(u)] = 0;
    const std::int64_t units = static_cast<std::int64_t>(journal_.done.size());
    std::ostringstream summary;
    summary << "resume: " << journal_.done_units() - static_cast<std::int64_t>(failing_.size()) << " of " << units
            << " units done and verified";
    if (!failing_.empty()) {
        summary << "; " << failing_.size() << " failed their checksum (first: unit " << failing_.front()
                << ", sequences [" << resume.unit_bounds[static_cast<std::size_t>(failing_.front())] << ", "
                << resume.unit_bounds[static_cast<std::size_t>(failing_.front()) + 1] << ")) and are computed again";
    }
    resume.summary = summary.str();
    return resume;
}

ResumeState inspect_for_resume(const std::string& output, bool force, const io::OutputLayout& layout,
                               const std::string& identity) {
    ResumeInspection inspection(output, force, layout, identity);
    while (!inspection.verify_some(std::uint64_t{1} << 30)) {
    }
    return inspection.result();
}

void broadcast_resume(Comm& comm, ResumeState& resume) {
    comm.broadcast(&resume.state, sizeof resume.state, 0);
    broadcast_vector(comm, resume.unit_bounds, 0);
    broadcast_vector(comm, resume.done, 0);
}

std::vector<Unit> resumed_units(const std::vector<std::int32_t>& lengths, const CostModel& cost,
                                const ResumeState& resume, std::int64_t max_sequences) {
    std::vector<Unit> units = units_with_bounds(lengths, cost, resume.unit_bounds);
    std::int64_t largest = 0;
    for (const Unit& unit : units) largest = std::max(largest, unit.last - unit.first);
    if (largest > max_sequences) {
        throw Error(exit_usage, "--resume: the partial output's units hold up to " + std::to_string(largest) +
                                    " sequences, but --max-memory allows " + std::to_string(max_sequences) +
                                    " per step on this run; hint: resume with the --max-memory (and --io) of the "
                                    "first attempt, or more");
    }
    return units;
}

std::vector<std::int64_t> unit_bounds_of(const std::vector<Unit>& units) {
    std::vector<std::int64_t> bounds{0};
    for (const Unit& unit : units) bounds.push_back(unit.last);
    return bounds;
}

}  // namespace attnbatch::distributed
