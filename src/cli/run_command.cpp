// `attnbatch run`: the batch job, on one rank or many. Rank 0 validates the input and
// broadcasts what it found; the ranks agree on every failure, so that they all exit with the
// same code; the plan cuts the batch into units independently of the number of ranks, and
// the coordinator runs them in rounds, overlapping I/O with compute.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <tuple>
#include <sys/stat.h>
#include <unistd.h>

#include "attnbatch/distributed/comm.hpp"
#include "attnbatch/distributed/coordinator.hpp"
#include "attnbatch/distributed/mpi_comm.hpp"
#include "attnbatch/distributed/plan.hpp"
#include "attnbatch/distributed/schedule.hpp"
#include "attnbatch/distributed/spec_codec.hpp"
#include "attnbatch/distributed/step_io.hpp"
#include "attnbatch/distributed/stop_request.hpp"
#include "attnbatch/distributed/unit_computer.hpp"
#include "attnbatch/distributed/memory_model.hpp"
#include "attnbatch/error.hpp"
#include "attnbatch/io/fault_injection.hpp"
#include "attnbatch/io/input.hpp"
#include "attnbatch/io/input_reader.hpp"
#include "attnbatch/io/output.hpp"
#include "attnbatch/io/output_size.hpp"
#include "attnbatch/kernels/attention.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "progress.hpp"
#include "resume.hpp"
#include "resume_identity.hpp"
#include "run_options.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace attnbatch::cli {

namespace {

// Rounds wanted at least, so that reading and writing hide behind compute (with R rounds
// about 1/R of the I/O stays exposed).
constexpr int kMinRounds = 8;
// A step's predicted cost is capped at this many seconds of compute at a conservative speed
// per thread, so that a stop signal is answered within about one step.
constexpr double kMaxStepSeconds = 10.0;
constexpr double kAssumedFlopsPerThread = 20e9;

// MPI for the lifetime of the command.
class MpiSession {
public:
    MpiSession() {
        int initialized = 0;
        MPI_Initialized(&initialized);
        if (!initialized) {
            // The main thread waits in MPI while the compute thread works: waiting must yield
            // the core rather than spin on it. Only a default; the user's setting wins.
            ::setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
            int provided = 0;
            MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
            owned_ = true;
        }
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    }
    ~MpiSession() {
        if (owned_) MPI_Finalize();
    }
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;
    int size() const { return size_; }
    int rank() const { return rank_; }

private:
    bool owned_ = false;
    int size_ = 1, rank_ = 0;
};

// The output must be a new file path, never the input or the weights (--force would otherwise
// replace them) and never a directory (found out only at the final rename, after the work).
void check_output_path(const RunOptions& o) {
    struct stat out {};
    if (::stat(o.output.c_str(), &out) != 0) return;
    if (S_ISDIR(out.st_mode)) {
        throw Error(exit_usage, "--output " + o.output + " is a directory, expected a file path; hint: e.g. " + o.output + "/out.h5");
    }
    for (const std::string* input : {&o.input.input_path, &o.input.weights_path}) {
        struct stat in {};
        if (input->empty() || ::stat(input->c_str(), &in) != 0) continue;
        if (in.st_dev == out.st_dev && in.st_ino == out.st_ino) {
            throw Error(exit_usage, "--output " + o.output + " is the same file as " + *input +
                                            ", expected a different path (inputs are never overwritten, even with --force)");
        }
    }
}

// Rank 0 reads --config files and every rank parses the same text.
RunOptions parse_options_everywhere(distributed::Comm& comm, const std::vector<std::string>& args) {
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
            distributed::broadcast_string(comm, content, 0);
            if (!found) return std::nullopt;
            return content;
        });
    }
    RunOptions o;
    distributed::agreed(comm, true, [&] { o = parse_run_options(args); });
    return o;
}

distributed::CostModel cost_model_for(const io::InputSpec& spec, bool causal) {
    distributed::CostModel model;
    model.heads = spec.heads;
    model.d_k = spec.d_k;
    model.d_v = spec.d_v;
    model.causal = causal;
    if (spec.weights) {
        model.d_in = spec.weights->d_in;
        model.d_out = spec.weights->has_w_o ? spec.weights->d_out : 0;
    }
    return model;
}

// The sequences a rank's share spans (contiguous shares: exactly its sequences).
std::pair<std::int64_t, std::int64_t> share_span(const std::vector<distributed::Unit>& units, const distributed::RankShare& share) {
    if (share.units.empty()) return {0, 0};
    return {units[static_cast<std::size_t>(share.units.front())].first,
            units[static_cast<std::size_t>(share.units.back())].last};
}

void print_plan(const distributed::Plan& plan, const std::vector<distributed::Unit>& units, const std::string& schedule,
                const char* strategy) {
    const std::size_t ranks = plan.ranks.size();
    double total = 0, largest = 0;
    for (const distributed::RankShare& share : plan.ranks) {
        total += share.cost;
        largest = std::max(largest, share.cost);
    }
    std::cout << std::fixed << std::setprecision(3);
    std::cout << "  plan: " << units.size() << " units on " << ranks << " ranks (" << schedule << ", " << strategy
              << "), predicted imbalance " << plan.imbalance * 100 << "%\n";
    // Every rank for small runs; the extremes otherwise (a 4096-rank table helps no one).
    const std::size_t shown = ranks <= 16 ? ranks : 0;
    for (std::size_t r = 0; r < shown; ++r) {
        const distributed::RankShare& s = plan.ranks[r];
        const auto [first, last] = share_span(units, s);
        std::cout << "    rank " << r << ": " << s.units.size() << " units, sequences [" << first << ", " << last << "), "
                  << s.tokens << " tokens, predicted " << s.cost * 1e-9 << " GFLOP\n";
    }
    if (shown == 0 && ranks > 0) {
        auto [lo, hi] = std::minmax_element(plan.ranks.begin(), plan.ranks.end(),
                                            [](const distributed::RankShare& a, const distributed::RankShare& b) { return a.cost < b.cost; });
        std::cout << "    per rank: mean " << total / static_cast<double>(ranks) * 1e-9 << " GFLOP, min " << lo->cost * 1e-9
                  << " (rank " << (lo - plan.ranks.begin()) << "), max " << hi->cost * 1e-9 << " (rank "
                  << (hi - plan.ranks.begin()) << ")\n";
    }
    std::cout << "PLAN ranks=" << ranks << " units=" << units.size() << " schedule=" << schedule << " strategy=" << strategy
              << " imbalance_percent=" << plan.imbalance * 100 << " max_rank_gflop=" << largest * 1e-9
              << " mean_rank_gflop=" << (ranks ? total / static_cast<double>(ranks) * 1e-9 : 0.0) << '\n';
    std::cout.unsetf(std::ios::floatfield);
}

double imbalance_of(const std::vector<distributed::RankTimes>& ranks) {
    double sum = 0, largest = 0;
    for (const distributed::RankTimes& t : ranks) {
        sum += t.compute;
        largest = std::max(largest, t.compute);
    }
    return sum > 0 ? largest / (sum / static_cast<double>(ranks.size())) - 1.0 : 0.0;
}

double hidden_fraction_of(const std::vector<distributed::RankTimes>& ranks) {
    double io = 0, exposed = 0;
    for (const distributed::RankTimes& t : ranks) {
        const double mine = t.read + t.write + t.communicate;
        io += mine;
        exposed += std::min(mine, t.exposed);
    }
    return io > 0 ? 1.0 - exposed / io : 1.0;
}

void write_report(const std::string& path, const RunOptions& o, const std::string& io_mode, int threads, double total,
                  const distributed::RunResult& result, std::size_t units, std::int64_t max_sequences) {
    std::ofstream out(path);
    if (!out) throw Error(exit_io, "--report: cannot write '" + path + "'");
    out << std::setprecision(6) << "{\n  \"ranks\": " << result.ranks.size() << ",\n  \"threads\": " << threads
        << ",\n  \"io\": \"" << io_mode << "\",\n  \"schedule\": \"" << o.schedule << "\",\n  \"output\": \"" << o.output
        << "\",\n  \"wall_seconds\": " << total << ",\n  \"units\": " << units << ",\n  \"rounds\": " << result.rounds
        << ",\n  \"max_sequences_per_step\": " << max_sequences << ",\n  \"imbalance\": " << imbalance_of(result.ranks)
        << ",\n  \"io_hidden_fraction\": " << hidden_fraction_of(result.ranks) << ",\n  \"collective_fallback\": \""
        << result.collective_fallback << "\",\n  \"per_rank\": [";
    for (std::size_t r = 0; r < result.ranks.size(); ++r) {
        const distributed::RankTimes& t = result.ranks[r];
        const double flops = t.attention_flops + t.projection_flops;
        out << (r ? "," : "") << "\n    {\"rank\": " << r << ", \"wall\": " << t.wall << ", \"read\": " << t.read
            << ", \"compute\": " << t.compute << ", \"communicate\": " << t.communicate << ", \"write\": " << t.write
            << ", \"idle\": " << t.idle << ", \"units\": " << t.units << ", \"steps\": " << t.steps
            << ", \"sequences\": " << t.sequences << ", \"tokens\": " << t.tokens << ", \"attention_gflop\": "
            << t.attention_flops * 1e-9 << ", \"projection_gflop\": " << t.projection_flops * 1e-9
            << ", \"compute_gflops\": " << (t.compute > 0 ? flops / t.compute * 1e-9 : 0.0)
            << ", \"io_exposed\": " << t.exposed << ", \"io_hidden_fraction\": " << t.hidden_fraction() << "}";
    }
    out << "\n  ]\n}\n";
}

struct Job {
    RunOptions o;
    io::InputSpec spec;
    std::optional<io::ProjectionWeights> weights;
    io::OutputLayout layout;
    distributed::AttentionSettings settings;
    std::vector<std::int32_t> lengths;
};

int run_job(distributed::Comm& comm, const std::vector<std::string>& args) {
    const bool root = comm.is_root();
    Job job;
    job.o = parse_options_everywhere(comm, args);
    const RunOptions& o = job.o;
    if (o.stop) return exit_ok;
    const double t_start = MPI_Wtime();
    distributed::install_stop_handlers();
    distributed::agreed(comm, true, [&] { io::arm_fault_from_environment(comm.rank()); });
    distributed::agreed(comm, root, [&] { check_output_path(o); });

    // Rank 0 validates shapes, types and lengths; the data values are scanned later, each
    // rank its own share.
    distributed::agreed(comm, root, [&] {
        io::InputOptions input = o.input;
        input.check_finite = false;
        job.spec = io::describe_input(input);
        if (job.spec.weights) job.weights = io::read_weights(*job.spec.weights);
        io::InputReader lengths_reader(job.spec);
        job.lengths = lengths_reader.read_all_lengths();
    });
    distributed::broadcast_spec(comm, job.spec, 0);
    distributed::broadcast_weights(comm, job.weights, 0);
    distributed::broadcast_vector(comm, job.lengths, 0);
    const io::InputSpec& spec = job.spec;

    io::OutputLayout& layout = job.layout;
    layout = io::output_layout_for(spec);
    layout.save_weights = o.save_weights;
    layout.weights_dtype = o.weights_dtype;
    layout.gzip_level = o.gzip_level;
    distributed::agreed(comm, true, [&] {
        if (!o.weights_seqs_given) return;
        if (o.weights_last > spec.n) {
            throw Error(exit_usage, "--weights-seqs " + std::to_string(o.weights_first) + ":" +
                                            std::to_string(o.weights_last) + " ends past N = " + std::to_string(spec.n) +
                                            " (expected A < B <= N)");
        }
        layout.weights_first = o.weights_first;
        layout.weights_last = o.weights_last;
    });

    const int ranks = comm.size();
    // A dry run for --simulate-ranks P sizes the job those P ranks would run.
    const int plan_ranks = o.dry_run && o.simulate_ranks > 0 ? o.simulate_ranks : ranks;
    const std::string io_mode = o.io_mode != "auto" ? o.io_mode : plan_ranks > 1 ? "parallel" : "gather";
    kernels::KernelOptions kernel = o.kernel;
#if defined(_OPENMP)
    if (kernel.threads <= 0) kernel.threads = omp_get_max_threads();
#else
    kernel.threads = 1;
#endif
    distributed::AttentionSettings& settings = job.settings;
    settings.causal = o.causal;
    settings.scale = o.scale > 0 ? static_cast<float>(o.scale) : static_cast<float>(1.0 / std::sqrt(static_cast<double>(spec.d_k)));
    settings.kernel = kernel;

    // Units: sized by the memory bound, formed the same way whatever the number of ranks.
    const int in_flight = io_mode == "gather" && plan_ranks > 1 ? 3 : 2;
    const distributed::MemoryModel memory = distributed::memory_model(spec, layout, kernel, in_flight);
    std::int64_t max_sequences = 0;
    distributed::agreed(comm, true, [&] {
        max_sequences = distributed::sequences_per_unit(memory, o.max_memory, spec.n);
        if (o.unit_sequences > 0) max_sequences = std::min<std::int64_t>(max_sequences, o.unit_sequences);
    });
    const distributed::CostModel cost = cost_model_for(spec, o.causal);
    std::vector<distributed::Unit> all_units = distributed::form_units(job.lengths, cost, max_sequences);

    // The journal's identity: rank 0 reads the files' metadata, every rank records the same.
    std::string identity;
    if (root) identity = resume_identity(spec, job.weights, job.lengths, settings, layout);
    distributed::broadcast_string(comm, identity, 0);
    Resume resume;
    if (o.resume && !o.dry_run) {
        distributed::agreed(comm, root, [&] { resume = inspect_for_resume(o, layout, identity); });
        broadcast_resume(comm, resume);
    }
    if (resume.state == Resume::complete) return exit_ok;
    distributed::RoundProgress done_before;
    std::vector<distributed::Unit> units;  // what this attempt computes: every unit, or those not done
    if (resume.state == Resume::partial) {
        distributed::agreed(comm, true, [&] { all_units = resumed_units(job.lengths, cost, resume, max_sequences); });
        for (std::size_t u = 0; u < all_units.size(); ++u) {
            if (!resume.done[u]) {
                units.push_back(all_units[u]);
                continue;
            }
            done_before.units += 1;
            done_before.sequences += all_units[u].last - all_units[u].first;
            done_before.cost += all_units[u].cost;
        }
    } else {
        units = all_units;
    }
    const bool dynamic = o.schedule == "dynamic";
    // The static plan also tells each rank which values to scan under --io parallel.
    const distributed::Plan plan = distributed::plan_static(units, plan_ranks, distributed::StaticStrategy::contiguous);

    const io::OutputSizes sizes = io::estimate_output_bytes(layout);
    if (root) {
        std::cout << "attnbatch run: " << spec.path << " N=" << spec.n << " L=" << spec.len << " H=" << spec.heads
                  << " d_k=" << spec.d_k << " d_v=" << spec.d_v << (o.causal ? " causal" : "") << " -> " << o.output << '\n'
                  << "  output " << distributed::format_bytes(static_cast<double>(sizes.output + sizes.lse + sizes.lengths))
                  << ", weights " << distributed::format_bytes(static_cast<double>(sizes.attention)) << " ("
                  << io::name_of(layout.save_weights) << ", " << io::name_of(layout.weights_dtype) << ")"
                  << (layout.gzip_level ? " before gzip" : "") << "; " << plan_ranks << (plan_ranks == 1 ? " rank" : " ranks")
                  << (plan_ranks != ranks ? " (simulated)" : "") << " x "
                  << kernel.threads << " threads, io " << io_mode << ", steps of at most " << max_sequences
                  << " sequences under --max-memory " << distributed::format_bytes(static_cast<double>(o.max_memory)) << " per rank\n";
        if (o.dry_run || ranks > 1) {
            if (dynamic) print_plan(distributed::simulate_dynamic(units, plan_ranks), units, o.schedule, "simulated-equal-speed");
            else print_plan(plan, units, o.schedule, "contiguous");
        }
        if (o.dry_run) std::cout << "  dry run: shapes, types and lengths validated, values not scanned, nothing written\n";
        std::cout.flush();
    }
    if (o.dry_run) return exit_ok;

    distributed::agreed(comm, root, [&] {
        if (layout.gzip_level != 0 || resume.state == Resume::partial) return;  // a partial holds its space
        const std::uint64_t free_bytes = io::free_bytes_at(o.output);
        if (sizes.total() > free_bytes) {
            throw Error(exit_usage, o.output + ": the output needs " + distributed::format_bytes(static_cast<double>(sizes.total())) +
                                            " but its file system has " + distributed::format_bytes(static_cast<double>(free_bytes)) +
                                            " free; hint: --save-weights mean|none, --weights-dtype f16, --weights-seqs A:B or "
                                            "--compression gzip shrink it");
        }
    });

    // Every value checked before any compute: in parallel each rank scans its own share.
    const bool parallel = io_mode == "parallel";
    distributed::agreed(comm, root || parallel, [&] {
        io::ValueScan scan{0, spec.n, root, o.input.scan_bytes};
        if (parallel) std::tie(scan.first, scan.last) = share_span(units, plan.ranks[static_cast<std::size_t>(comm.rank())]);
        io::check_values(spec, scan);
    });

    io::Provenance provenance;
    provenance.version = ATTNBATCH_VERSION;
    provenance.creation_time = io::creation_time_now();
    distributed::broadcast_string(comm, provenance.creation_time, 0);  // attributes must match on every rank
    provenance.input_file = spec.path;
    provenance.input_dataset = spec.mode == io::InputMode::embeddings ? spec.dataset : spec.query + "," + spec.key + "," + spec.value;
    provenance.heads = spec.heads;
    provenance.causal = o.causal;
    provenance.scale = settings.scale;
    provenance.ranks = ranks;
    provenance.threads = kernel.threads;
    provenance.io_mode = io_mode;
    provenance.config = o.resolved_config;

    io::OutputOptions output_options;
    output_options.force = o.force;
    output_options.journal = io::JournalPlan{unit_bounds_of(all_units), identity};
    const bool continuing = resume.state == Resume::partial;
    const auto open_output = [&](const io::FileAccess& access) {
        if (continuing) return std::make_unique<io::OutputFile>(io::OutputFile::reopen(o.output, layout, access));
        return std::make_unique<io::OutputFile>(io::OutputFile::create(o.output, layout, provenance, output_options));
    };
    std::unique_ptr<io::OutputFile> output;
    std::unique_ptr<io::InputReader> reader;
    std::unique_ptr<distributed::StepIo> step_io;
    if (parallel) {
        if (!continuing) distributed::agreed(comm, root, [&] { io::prepare_output_path(o.output, o.force); });
        output_options.paths_prepared = true;
        output_options.access.configure = [](hid_t fapl) { H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL); };
        // Collective: a failure here is the same on every rank, or the job cannot go on.
        int code = 0;
        std::string message;
        try {
            output = open_output(output_options.access);
        } catch (const Error& e) {
            code = e.exit_code();
            message = e.what();
        }
        const distributed::AgreedError created = distributed::agree(comm, code, message);
        if (created.code != 0 && output) {
            if (root) std::cerr << "attnbatch run: error: " << created.message << '\n';
            comm.abort(created.code);
        }
        if (created.code != 0) throw distributed::AgreedFailure(created.code, created.message);
        distributed::agreed(comm, true, [&] { reader = std::make_unique<io::InputReader>(spec); });
        step_io = distributed::make_parallel_io(comm, std::move(reader), std::move(output), o.force);
    } else {
        distributed::agreed(comm, root, [&] {
            output = open_output(output_options.access);
            reader = std::make_unique<io::InputReader>(spec);
        });
        step_io = distributed::make_gather_io(comm, spec, layout, std::move(reader), std::move(output));
    }

    const double max_step_cost = kMaxStepSeconds * kAssumedFlopsPerThread * kernel.threads;
    distributed::RunResult result;
    try {
        std::unique_ptr<distributed::Scheduler> scheduler =
            dynamic ? distributed::make_dynamic_scheduler(units, ranks, max_sequences, kMinRounds, max_step_cost)
                    : distributed::make_static_scheduler(distributed::static_rounds(units, plan, max_sequences, kMinRounds, max_step_cost));
        double total_cost = 0;
        for (const distributed::Unit& unit : all_units) total_cost += unit.cost;
        ProgressReporter progress(root || o.verbose ? o.progress : "never", o.progress_interval,
                                  static_cast<std::int64_t>(all_units.size()), spec.n, total_cost,
                                  o.verbose && ranks > 1 ? "rank " + std::to_string(comm.rank()) : "");
        progress.resumed_from(done_before);
        distributed::RunContext context{spec, job.weights, settings, layout};
        context.on_round = [&progress](const distributed::RoundProgress& p) { progress.update(p); };
        result = distributed::run_rounds(comm, context, *scheduler, *step_io);
        progress.finish();
        step_io.reset();
    } catch (const distributed::AgreedFailure&) {
        throw;  // every rank closed the output together and leaves together
    } catch (const std::exception& e) {
        // An io error at the end (the final flush or rename on a full disk) keeps its exit
        // code; anything else is a bug.
        const auto* io_error = dynamic_cast<const Error*>(&e);
        if (ranks == 1) throw;
        // Caught here, before the output's destructor could start a collective close that
        // the other ranks would never join.
        std::cerr << "attnbatch run: " << (io_error ? "error" : "internal error") << ": rank " << comm.rank() << ": "
                  << e.what() << '\n';
        comm.abort(io_error ? io_error->exit_code() : exit_internal);
    }
    const double total = MPI_Wtime() - t_start;
    if (!root) return exit_ok;

    distributed::RankTimes sum;
    double slowest_compute = 0;
    for (const distributed::RankTimes& t : result.ranks) {
        sum.sequences += t.sequences;
        sum.tokens += t.tokens;
        sum.attention_flops += t.attention_flops;
        sum.projection_flops += t.projection_flops;
        sum.read += t.read;
        sum.write += t.write;
        sum.communicate += t.communicate;
        sum.compute += t.compute;
        slowest_compute = std::max(slowest_compute, t.compute);
    }
    const double flops = sum.attention_flops + sum.projection_flops;
    if (!o.report.empty()) {
        write_report(o.report, o, io_mode, kernel.threads, total, result, units.size(), max_sequences);
    }
    if (!result.collective_fallback.empty()) {
        std::cout << "  note: collective writes fell back to independent I/O (" << result.collective_fallback << ")\n";
    }
    std::cout << std::fixed << std::setprecision(3) << "  done: " << result.rounds << " rounds, " << units.size() << " units, "
              << sum.sequences << " sequences in " << total << " s (summed over ranks: read " << sum.read << ", compute "
              << sum.compute << ", communicate " << sum.communicate << ", write " << sum.write << "; I/O hidden "
              << std::setprecision(1) << hidden_fraction_of(result.ranks) * 100 << "%)\n"
              << std::setprecision(3) << "PERFORMANCE ranks=" << ranks << " threads=" << kernel.threads
              << " sequences=" << sum.sequences << " tokens=" << sum.tokens
              << " seconds=" << total << " seqs_per_s=" << std::setprecision(1) << static_cast<double>(sum.sequences) / total
              << " compute_gflops=" << (slowest_compute > 0 ? flops / slowest_compute * 1e-9 : 0.0)
              << " end_to_end_gflops=" << flops / total * 1e-9 << std::setprecision(3)
              << " imbalance=" << imbalance_of(result.ranks) << " io_hidden=" << hidden_fraction_of(result.ranks)
              << " io=" << io_mode << " schedule=" << o.schedule << '\n';
    return exit_ok;
}

}  // namespace

int run_command(const std::vector<std::string>& args) {
    MpiSession mpi;
    std::unique_ptr<distributed::Comm> comm = mpi.size() > 1 ? distributed::make_mpi_comm(MPI_COMM_WORLD) : distributed::make_serial_comm();
    try {
        return run_job(*comm, args);
    } catch (const distributed::AgreedFailure& failure) {
        // Every rank is here with the same code; rank 0 speaks for them.
        if (comm->is_root()) throw Error(failure.exit_code(), failure.what());
        return failure.exit_code();
    } catch (const Error& e) {
        if (mpi.size() == 1) throw;
        std::cerr << "attnbatch run: error: rank " << mpi.rank() << ": " << e.what() << '\n';
        comm->abort(e.exit_code());
        return e.exit_code();  // not reached
    } catch (const std::exception& e) {
        if (mpi.size() == 1) throw;
        // Other ranks may be waiting in a collective for this one: end the job.
        std::cerr << "attnbatch run: internal error: rank " << mpi.rank() << ": " << e.what() << '\n';
        comm->abort(exit_internal);
        return exit_internal;  // not reached
    }
}

}  // namespace attnbatch::cli
