// `attnbatch run`: options to JobSettings, then the distributed layer's job (job.hpp) does
// the work; rank 0 prints what the job found and did (run_printing) and writes the --report.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <new>
#include <sstream>

#include "attnbatch/distributed/agreement.hpp"
#include "attnbatch/distributed/job.hpp"
#include "attnbatch/distributed/mpi_session.hpp"
#include "attnbatch/distributed/stop_request.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "progress.hpp"
#include "run_on.hpp"
#include "run_options.hpp"
#include "run_printing.hpp"
#include "run_report.hpp"

namespace attnbatch::cli {

namespace {

namespace dist = attnbatch::distributed;

// Rank 0 reads --config files and every rank parses the same text.
RunOptions parse_options_everywhere(dist::Comm& comm, const std::vector<std::string>& args) {
    if (comm.size() > 1) {
        set_config_reader([&comm](const std::string& path) -> std::optional<std::string> {
            std::string content;
            std::int64_t found = 0;
            if (comm.is_root()) {
                std::ifstream file(path);
                if (file) {
                    std::ostringstream text;
                    text << file.rdbuf();
                    content = text.str();
                    found = 1;
                }
            }
            comm.broadcast(&found, sizeof found, 0);
            dist::broadcast_string(comm, content, 0);
            if (!found) return std::nullopt;
            return content;
        });
    }
    RunOptions o;
    dist::agreed(comm, true, [&] { o = parse_run_options(args); });
    return o;
}

// `mpi_init`: this rank's seconds in MPI_Init.
int run(const dist::MpiSession& mpi, dist::Comm& comm, const std::vector<std::string>& args, double mpi_init) {
    const RunOptions o = parse_options_everywhere(comm, args);
    if (o.stop) return exit_ok;
    const bool root = comm.is_root();
    dist::agreed(comm, root, [&] { check_report_path(o.report); });
    dist::Job job = dist::prepare_job(comm, o.job);
    if (root && !job.resume.summary.empty() && job.nothing_to_do()) std::cout << "  " << job.resume.summary << '\n';
    if (root && job.nothing_to_do()) note_late_stop();
    if (job.nothing_to_do()) return exit_ok;
    int largest_node = 0;
    for (const dist::NodeShare& node : job.nodes) largest_node = std::max(largest_node, node.ranks);
    const dist::Messaging messaging = root ? mpi.messaging(static_cast<int>(job.nodes.size()), largest_node) : dist::Messaging{};
    if (root) {
        for (const std::string& warning : job.warnings) std::cerr << "attnbatch run: warning: " << warning << '\n';
        print_header(job, messaging);
        if (!job.resume.summary.empty()) std::cout << "  " << job.resume.summary << '\n';
        if (o.job.dry_run || comm.size() > 1) print_plan(job);
        std::cout.flush();
    }
    if (o.job.dry_run) {
        // The real run's own checks, not a copy of them: the two cannot drift apart.
        dist::preflight(job);
        if (root) {
            for (const std::string& note : job.notes) std::cout << "  " << note << '\n';
            std::cout << "  dry run: every check of the real run passed except the value scan (NaN/inf: it reads all "
                         "the data); nothing written\n";
            note_late_stop();
        }
        return exit_ok;
    }

    double total_cost = 0;
    for (const dist::Unit& unit : job.all_units) total_cost += unit.cost;
    const bool speaks = root || o.verbose;
    ProgressReporter progress(speaks ? o.progress : "never", o.progress_interval, static_cast<std::int64_t>(job.all_units.size()),
                              job.spec.n, total_cost, o.verbose && comm.size() > 1 ? "rank " + std::to_string(comm.rank()) : "");
    progress.resumed_from(job.done_before);
    const dist::JobResult result = dist::run_job(job, [&progress](const dist::RoundProgress& p) { progress.update(p); });
    progress.finish();
    mpi_init = comm.max(mpi_init);
    if (!root) return exit_ok;
    if (!o.report.empty()) write_report(o.report, job, result, mpi_init, messaging);
    print_summary(job, result);
    note_late_stop();
    return exit_ok;
}

}  // namespace

namespace {

// One rank's own failure: thrown as it is where the job has one rank; otherwise the job ends
// (MPI_Abort), since the other ranks may be waiting for this one inside a collective. A failure
// the ranks agreed on passes through. Shared by the command and by run_on.
int run_ending_the_job_on_a_rank_failure(const dist::MpiSession& mpi, dist::Comm& comm, const std::vector<std::string>& args,
                                         double mpi_init) {
    try {
        return run(mpi, comm, args, mpi_init);
    } catch (const dist::AgreedFailure&) {
        throw;
    } catch (const Error& e) {
        if (comm.size() == 1) throw;
        dist::abort_job(comm, e.exit_code(), e.what());
    } catch (const std::bad_alloc&) {
        if (comm.size() == 1) throw Error(exit_out_of_memory, out_of_memory_message);
        dist::abort_job(comm, exit_out_of_memory, out_of_memory_message);
    } catch (const std::exception& e) {
        if (comm.size() == 1) throw;
        dist::abort_job(comm, exit_internal, std::string("internal error: ") + e.what());
    }
}

}  // namespace

void run_on(const dist::MpiSession& mpi, dist::Comm& comm, const std::vector<std::string>& args) {
    run_ending_the_job_on_a_rank_failure(mpi, comm, args, 0.0);
}

int run_command(const std::vector<std::string>& args) {
    const auto started = std::chrono::steady_clock::now();
    const dist::MpiSession mpi;
    const double mpi_init = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::unique_ptr<dist::Comm> comm = mpi.world();
    try {
        return run_ending_the_job_on_a_rank_failure(mpi, *comm, args, mpi_init);
    } catch (const dist::AgreedFailure& failure) {
        // Every rank is here with the same code; rank 0 speaks for them, and before MPI ends:
        // mpirun ends the whole job as soon as one rank exits non-zero, so the others leave
        // only once the line is written (a rank 0 still unwinding would be killed unheard).
        if (comm->is_root()) std::cerr << "attnbatch run: error: " << failure.what() << std::endl;
        comm->barrier();
        return failure.exit_code();
    }
}

}  // namespace attnbatch::cli
