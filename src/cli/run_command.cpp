// `attnbatch run`: options to JobSettings, then the distributed layer's job (job.hpp) does
// the work; this file prints what the job found and did, and writes the --report.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "attnbatch/distributed/agreement.hpp"
#include "attnbatch/distributed/job.hpp"
#include "attnbatch/distributed/mpi_session.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "json_writer.hpp"
#include "progress.hpp"
#include "ranges.hpp"
#include "run_options.hpp"

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

// "1 rank", "2 ranks".
template <class Count>
std::string counted(Count count, const char* noun) {
    return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

void print_header(const dist::Job& job) {
    const dist::JobSettings& s = job.settings;
    const io::InputSpec& spec = job.spec;
    const int ranks = job.comm.size();
    std::cout << "attnbatch run: " << spec.path << " N=" << spec.n
              << (spec.n != job.stored_sequences ? " (sequences " + format_range(spec.first_sequence, spec.first_sequence + spec.n) +
                                                       " of " + std::to_string(job.stored_sequences) + ")"
                                                 : std::string())
              << " L=" << spec.len << " H=" << spec.heads;
    if (spec.kv_head_count() != spec.heads) std::cout << " G=" << spec.kv_head_count();
    std::cout << " d_k=" << spec.d_k << " d_v=" << spec.d_v << (s.causal ? " causal" : "")
              << (s.kernel.precision == kernels::Precision::bf16 ? " bf16 on " + kernels::matrix_unit(s.kernel) : std::string());
    if (s.rope_theta > 0) std::cout << " rope_theta=" << s.rope_theta;
    std::cout << " -> " << s.output << '\n';
    if (spec.weights && spec.weights->file_heads > 0 && s.input.heads == 0) {
        std::cout << "  heads from " << spec.weights->path << ": H=" << spec.heads
                  << (spec.weights->file_kv_heads > 0 ? " G=" + std::to_string(spec.kv_head_count()) : std::string()) << '\n';
    }
    if (spec.weights && spec.weights->file_rope_theta > 0 && !(s.rope_theta > 0)) {
        std::cout << "  note: " << spec.weights->path << " records rope_theta = " << spec.weights->file_rope_theta
                  << " (its model's rotary embeddings), not applied; hint: --rope-theta " << spec.weights->file_rope_theta
                  << " applies them\n";
    }
    std::cout
              << "  output " << dist::format_bytes(static_cast<double>(job.sizes.output + job.sizes.lse + job.sizes.lengths))
              << ", weights " << dist::format_bytes(static_cast<double>(job.sizes.attention)) << " ("
              << io::name_of(job.layout.save_weights) << ", " << io::name_of(job.layout.weights_dtype) << ")"
              << (job.layout.gzip_level ? " before gzip" : "") << "; " << job.plan_ranks
              << (job.plan_ranks == 1 ? " rank" : " ranks") << (job.plan_ranks != ranks ? " (simulated)" : "") << " x "
              << counted(job.attention.kernel.threads, "thread") << ", io " << dist::name_of(job.io) << ", steps of at most "
              << counted(job.max_sequences, "sequence")
              << (job.max_step_bytes > 0 ? " and " + dist::format_bytes(static_cast<double>(job.max_step_bytes)) + " of data" : "")
              << " under --max-memory "
              << dist::format_bytes(static_cast<double>(s.max_memory)) << " per rank\n";
}

// Where a unit starts or ends: "s", or "s:r" for row r of sequence s (inside a split sequence).
// Where a unit starts and ends, in the input's numbering (`offset`: run --sequences): a
// sequence, or sequence:row inside a split one.
std::string start_of(const dist::Unit& unit, std::int64_t offset) {
    return unit.piece() && unit.row_first > 0 ? std::to_string(offset + unit.first) + ":" + std::to_string(unit.row_first)
                                              : std::to_string(offset + unit.first);
}
std::string end_of(const dist::Unit& unit, std::int64_t offset) {
    return unit.piece() && !unit.ends_sequence ? std::to_string(offset + unit.first) + ":" + std::to_string(unit.row_last)
                                               : std::to_string(offset + unit.last);
}

void print_plan(const dist::Job& job) {
    const dist::Plan& plan = job.predicted;
    const std::vector<dist::Unit>& units = job.units;
    const char* schedule = dist::name_of(job.settings.schedule);
    const char* strategy = job.settings.schedule == dist::ScheduleKind::dynamic ? "simulated-equal-speed" : "contiguous";
    const std::size_t ranks = plan.ranks.size();
    double total = 0, largest = 0, largest_unit = 0;
    std::int64_t idle = 0, pieces = 0, split = 0;
    for (const dist::RankShare& share : plan.ranks) {
        total += share.cost;
        largest = std::max(largest, share.cost);
        idle += share.units.empty() ? 1 : 0;
    }
    for (const dist::Unit& unit : units) {
        largest_unit = std::max(largest_unit, unit.cost);
        pieces += unit.piece() ? 1 : 0;
        split += unit.piece() && unit.row_first == 0 ? 1 : 0;
    }
    // The critical path is the costliest rank: no schedule of these units is shorter than
    // their largest, so its share of the path says how far splitting went.
    const double largest_share = largest > 0 ? largest_unit / largest : 0.0;
    std::cout << std::fixed << std::setprecision(3);
    std::cout << "  plan: " << counted(units.size(), "unit") << " on " << counted(ranks, "rank") << " (" << schedule << ", " << strategy
              << "), predicted imbalance " << plan.imbalance * 100 << "%";
    if (pieces > 0) std::cout << "; " << split << " long sequences split into " << pieces << " pieces of query rows";
    std::cout << '\n';
    std::cout << "    idle ranks: " << idle << " of " << ranks << " get no work; largest unit " << largest_unit * 1e-9
              << " GFLOP = " << largest_share * 100 << "% of the critical path (the costliest rank, " << largest * 1e-9
              << " GFLOP)\n";
    // Every rank for small runs; the extremes otherwise (a 4096-rank table helps no one).
    const std::size_t shown = ranks <= 16 ? ranks : 0;
    for (std::size_t r = 0; r < shown; ++r) {
        const dist::RankShare& share = plan.ranks[r];
        // Sequences as the input numbers them (they differ from the rows with --sequences).
        const std::int64_t offset = job.spec.first_sequence;
        const std::string first = share.units.empty() ? std::to_string(offset) : start_of(units[static_cast<std::size_t>(share.units.front())], offset);
        const std::string last = share.units.empty() ? std::to_string(offset) : end_of(units[static_cast<std::size_t>(share.units.back())], offset);
        std::cout << "    rank " << r << ": " << counted(share.units.size(), "unit") << ", sequences [" << first << ", " << last
                  << "), " << share.tokens << " tokens, predicted " << share.cost * 1e-9 << " GFLOP\n";
    }
    if (shown == 0 && ranks > 0) {
        auto [lo, hi] = std::minmax_element(plan.ranks.begin(), plan.ranks.end(),
                                            [](const dist::RankShare& a, const dist::RankShare& b) { return a.cost < b.cost; });
        std::cout << "    per rank: mean " << total / static_cast<double>(ranks) * 1e-9 << " GFLOP, min " << lo->cost * 1e-9
                  << " (rank " << (lo - plan.ranks.begin()) << "), max " << hi->cost * 1e-9 << " (rank "
                  << (hi - plan.ranks.begin()) << ")\n";
    }
    std::cout << "PLAN ranks=" << ranks << " units=" << units.size() << " schedule=" << schedule << " strategy=" << strategy
              << " imbalance_percent=" << plan.imbalance * 100 << " max_rank_gflop=" << largest * 1e-9
              << " mean_rank_gflop=" << (ranks ? total / static_cast<double>(ranks) * 1e-9 : 0.0) << " idle_ranks=" << idle
              << " largest_unit_percent=" << largest_share * 100 << " split_sequences=" << split << " pieces=" << pieces
              << '\n';
    std::cout.unsetf(std::ios::floatfield);
}

void write_phases(JsonWriter& json, const dist::PhaseTimes& p, double mpi_init) {
    json.key("start_up_seconds").value(mpi_init + p.before_rounds())
        .key("shut_down_seconds").value(p.after_rounds())
        .key("phase_seconds").begin_object()
        .key("mpi_init").value(mpi_init)
        .key("describe").value(p.describe)
        .key("lengths").value(p.lengths)
        .key("plan").value(p.plan)
        .key("preflight").value(p.preflight)
        .key("value_scan").value(p.value_scan)
        .key("output_creation").value(p.output_creation)
        .key("first_read").value(p.first_read)
        .key("rounds").value(p.rounds)
        .key("last_write").value(p.last_write)
        .key("close").value(p.close)
        .key("publish").value(p.publish)
        .end_object();
}

void write_report(const std::string& path, const dist::Job& job, const dist::JobResult& result, double mpi_init) {
    JsonWriter json;
    json.begin_object()
        .key("ranks").value(result.rounds.ranks.size())
        .key("threads").value(job.attention.kernel.threads)
        .key("precision").value(kernels::precision_name(job.attention.kernel.precision))
        .key("io").value(dist::name_of(job.io))
        .key("schedule").value(dist::name_of(job.settings.schedule))
        .key("output").value(job.settings.output)
        .key("wall_seconds").value(result.wall_seconds)
        .key("units").value(job.units.size())
        .key("rounds").value(result.rounds.rounds)
        .key("max_sequences_per_step").value(job.max_sequences)
        .key("imbalance").value(result.imbalance)
        .key("predicted_imbalance").value(job.predicted.imbalance)
        .key("io_hidden_fraction").value(result.io_hidden)
        .key("collective_fallback").value(result.rounds.collective_fallback);
    write_phases(json, result.phases, mpi_init);
    json.key("per_rank").begin_array();
    for (std::size_t r = 0; r < result.rounds.ranks.size(); ++r) {
        const dist::RankTimes& t = result.rounds.ranks[r];
        const double flops = t.attention_flops + t.projection_flops;
        json.begin_object()
            .key("rank").value(r)
            .key("wall").value(t.wall)
            .key("read").value(t.read)
            .key("compute").value(t.compute)
            .key("communicate").value(t.communicate)
            .key("write").value(t.write)
            .key("idle").value(t.idle)
            .key("units").value(t.units)
            .key("steps").value(t.steps)
            .key("sequences").value(t.sequences)
            .key("tokens").value(t.tokens)
            .key("attention_gflop").value(t.attention_flops * 1e-9)
            .key("projection_gflop").value(t.projection_flops * 1e-9)
            .key("compute_gflops").value(t.compute > 0 ? flops / t.compute * 1e-9 : 0.0)
            .key("io_exposed").value(t.exposed)
            .key("io_hidden_fraction").value(t.hidden_fraction())
            .end_object();
    }
    json.end_array().end_object();
    std::ofstream out(path);
    out << json.text() << '\n';
    if (!out) throw Error(exit_io, "--report: cannot write '" + path + "'");
}

void print_summary(const dist::Job& job, const dist::JobResult& result) {
    const dist::RankTimes& sum = result.sum;
    const double total = result.wall_seconds;
    if (!result.rounds.collective_fallback.empty()) {
        std::cout << "  note: collective writes fell back to independent I/O (" << result.rounds.collective_fallback << ")\n";
    }
    std::cout << std::fixed << std::setprecision(3) << "  done: " << counted(result.rounds.rounds, "round") << ", "
              << counted(job.units.size(), "unit") << ", " << counted(sum.sequences, "sequence") << " in " << total << " s (summed over ranks: read " << sum.read
              << ", compute " << sum.compute << ", communicate " << sum.communicate << ", write " << sum.write
              << "; I/O hidden " << std::setprecision(1) << result.io_hidden * 100 << "%)\n"
              << std::setprecision(3) << "PERFORMANCE ranks=" << job.comm.size() << " threads=" << job.attention.kernel.threads
              << " sequences=" << sum.sequences << " tokens=" << sum.tokens << " seconds=" << total
              << " seqs_per_s=" << std::setprecision(1) << static_cast<double>(sum.sequences) / total
              << " compute_gflops=" << (result.slowest_compute > 0 ? result.flops() / result.slowest_compute * 1e-9 : 0.0)
              << " end_to_end_gflops=" << result.flops() / total * 1e-9 << std::setprecision(3)
              << " imbalance=" << result.imbalance << " predicted_imbalance=" << job.predicted.imbalance
              << " io_hidden=" << result.io_hidden << " io=" << dist::name_of(job.io)
              << " schedule=" << dist::name_of(job.settings.schedule) << '\n';
    std::cout.unsetf(std::ios::floatfield);
}

// The --report file is written last: a directory that is missing or not writable is found
// before the run rather than after it (a dry run asks the same).
void check_report_path(const std::string& report) {
    if (report.empty()) return;
    const std::filesystem::path path(report);
    const std::filesystem::path directory = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    std::error_code error;
    if (std::filesystem::is_directory(path, error)) {
        throw Error(exit_usage, "--report " + report + " is a directory, expected a file path; hint: e.g. " + report + "/run.json");
    }
    if (!std::filesystem::is_directory(directory, error)) {
        throw Error(exit_io, "--report " + report + ": directory " + directory.string() +
                                 " does not exist; hint: create it or fix --report");
    }
    if (::access(directory.c_str(), W_OK | X_OK) != 0) {
        throw Error(exit_io, "--report " + report + ": directory " + directory.string() + " is not writable: " +
                                 std::strerror(errno) + "; hint: choose another --report");
    }
}

// `mpi_init`: this rank's seconds in MPI_Init.
int run(dist::Comm& comm, const std::vector<std::string>& args, double mpi_init) {
    const RunOptions o = parse_options_everywhere(comm, args);
    if (o.stop) return exit_ok;
    const bool root = comm.is_root();
    dist::agreed(comm, root, [&] { check_report_path(o.report); });
    dist::Job job = dist::prepare_job(comm, o.job);
    if (root && !job.resume.summary.empty() && job.nothing_to_do()) std::cout << "  " << job.resume.summary << '\n';
    if (job.nothing_to_do()) return exit_ok;
    if (root) {
        for (const std::string& warning : job.warnings) std::cerr << "attnbatch run: warning: " << warning << '\n';
        print_header(job);
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
    if (!o.report.empty()) write_report(o.report, job, result, mpi_init);
    print_summary(job, result);
    return exit_ok;
}

}  // namespace

int run_command(const std::vector<std::string>& args) {
    const auto started = std::chrono::steady_clock::now();
    const dist::MpiSession mpi;
    const double mpi_init = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::unique_ptr<dist::Comm> comm = mpi.world();
    try {
        return run(*comm, args, mpi_init);
    } catch (const dist::AgreedFailure& failure) {
        // Every rank is here with the same code; rank 0 speaks for them.
        if (comm->is_root()) throw Error(failure.exit_code(), failure.what());
        return failure.exit_code();
    } catch (const Error& e) {
        if (mpi.size() == 1) throw;
        dist::abort_job(*comm, e.exit_code(), e.what());
    } catch (const std::exception& e) {
        if (mpi.size() == 1) throw;
        // Other ranks may be waiting in a collective for this one: end the job.
        dist::abort_job(*comm, exit_internal, std::string("internal error: ") + e.what());
    }
}

}  // namespace attnbatch::cli
