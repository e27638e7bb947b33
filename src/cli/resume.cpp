#include "resume.hpp"

#include <sys/stat.h>

#include <iostream>

#include "attnbatch/io/journal.hpp"
#include "command_line.hpp"

namespace attnbatch::cli {
namespace {

bool exists(const std::string& path) {
    struct stat status {};
    return ::lstat(path.c_str(), &status) == 0;
}

}  // namespace

Resume inspect_for_resume(const RunOptions& o, const io::OutputLayout& layout, const std::string& identity) {
    Resume resume;
    const std::string partial = io::OutputFile::partial_path_for(o.output);
    const bool have_partial = exists(partial);
    if (exists(o.output) && !(have_partial && o.force)) {
        std::cout << "  " << o.output << " is already complete; nothing to resume\n";
        resume.state = Resume::complete;
        return resume;
    }
    if (!have_partial) {
        std::cout << "  resume: no " << partial << " to continue; starting afresh\n";
        return resume;
    }
    const std::string differences = io::identity_differences(io::read_journal_identity(partial), identity);
    if (!differences.empty()) {
        throw Error(exit_usage, partial + " was written from other input or options (" + differences +
                                        "); hint: resume with the original ones, or --force to start afresh");
    }
    const io::OutputFile file = io::OutputFile::reopen(o.output, layout);
    const io::JournalState state = file.journal_state();
    resume.state = Resume::partial;
    resume.unit_bounds = state.plan.unit_bounds;
    resume.done = state.done;
    const std::vector<std::int64_t> failing = file.units_failing_checksum(state);
    for (std::int64_t u : failing) resume.done[static_cast<std::size_t>(u)] = 0;
    const std::int64_t units = static_cast<std::int64_t>(state.done.size());
    std::cout << "  resume: " << state.done_units() - static_cast<std::int64_t>(failing.size()) << " of " << units
              << " units done and verified";
    if (!failing.empty()) {
        std::cout << "; " << failing.size() << " failed their checksum (first: unit " << failing.front()
                  << ", sequences [" << resume.unit_bounds[static_cast<std::size_t>(failing.front())] << ", "
                  << resume.unit_bounds[static_cast<std::size_t>(failing.front()) + 1] << ")) and are computed again";
    }
    std::cout << '\n';
    return resume;
}

void broadcast_resume(distributed::Comm& comm, Resume& resume) {
    comm.broadcast(&resume.state, sizeof resume.state, 0);
    distributed::broadcast_vector(comm, resume.unit_bounds, 0);
    distributed::broadcast_vector(comm, resume.done, 0);
}

std::vector<distributed::Unit> resumed_units(const std::vector<std::int32_t>& lengths, const distributed::CostModel& cost,
                                      const Resume& resume, std::int64_t max_sequences) {
    std::vector<distributed::Unit> units = distributed::units_with_bounds(lengths, cost, resume.unit_bounds);
    std::int64_t largest = 0;
    for (const distributed::Unit& unit : units) largest = std::max(largest, unit.last - unit.first);
    if (largest > max_sequences) {
        throw Error(exit_usage, "--resume: the partial output's units hold up to " + std::to_string(largest) +
                                        " sequences, but --max-memory allows " + std::to_string(max_sequences) +
                                        " per step on this run; hint: resume with the --max-memory (and --io) of the "
                                        "first attempt, or more");
    }
    return units;
}

std::vector<std::int64_t> unit_bounds_of(const std::vector<distributed::Unit>& units) {
    std::vector<std::int64_t> bounds{0};
    for (const distributed::Unit& unit : units) bounds.push_back(unit.last);
    return bounds;
}

}  // namespace attnbatch::cli
