// `attnbatch run`: the batch job. Validates everything before any compute, says how big the
// output will be, then streams units of sequences through the pipeline into OUTPUT.partial
// and renames it to OUTPUT once complete.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "attnbatch/dist/pipeline.hpp"
#include "attnbatch/dist/unit_plan.hpp"
#include "attnbatch/io/errors.hpp"
#include "attnbatch/io/input.hpp"
#include "attnbatch/io/input_reader.hpp"
#include "attnbatch/io/output.hpp"
#include "attnbatch/io/output_size.hpp"
#include "attnbatch/kernels/attention.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "io_errors.hpp"
#include "run_options.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace attnbatch::cli {

namespace {

// MPI for the lifetime of the command; runs on more than one rank arrive with the
// distributed coordinator, until then they are refused rather than racing on one file.
class MpiSession {
public:
    MpiSession() {
        int initialized = 0;
        MPI_Initialized(&initialized);
        if (!initialized) {
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

std::string now_iso8601() {
    const std::time_t t = std::time(nullptr);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return text;
}

void write_report(const std::string& path, const RunOptions& o, const dist::PhaseTimes& t, double total,
                  std::int64_t unit_sequences, int threads) {
    std::ofstream out(path);
    if (!out) throw UserError(exit_io, "--report: cannot write '" + path + "'");
    const double gflops = t.compute > 0 ? (t.attention_flops + t.projection_flops) / t.compute * 1e-9 : 0.0;
    out << std::setprecision(6) << "{\n  \"ranks\": 1,\n  \"threads\": " << threads << ",\n  \"output\": \"" << o.output
        << "\",\n  \"wall_seconds\": " << total << ",\n  \"unit_sequences\": " << unit_sequences
        << ",\n  \"per_rank\": [{\"rank\": 0, \"read\": " << t.read << ", \"compute\": " << t.compute
        << ", \"communicate\": 0, \"write\": " << t.write << ", \"idle\": 0, \"units\": " << t.units
        << ", \"sequences\": " << t.sequences << ", \"tokens\": " << t.tokens << ", \"attention_gflop\": "
        << t.attention_flops * 1e-9 << ", \"projection_gflop\": " << t.projection_flops * 1e-9
        << ", \"compute_gflops\": " << gflops << "}],\n  \"imbalance\": 0\n}\n";
}

// The output must be a new file path, never the input or the weights (--force would otherwise
// replace them) and never a directory (found out only at the final rename, after the work).
void check_output_path(const RunOptions& o) {
    struct stat out {};
    if (::stat(o.output.c_str(), &out) != 0) return;
    if (S_ISDIR(out.st_mode)) {
        throw UserError(exit_usage, "--output " + o.output + " is a directory, expected a file path; hint: e.g. " + o.output + "/out.h5");
    }
    for (const std::string* input : {&o.input.input_path, &o.input.weights_path}) {
        struct stat in {};
        if (input->empty() || ::stat(input->c_str(), &in) != 0) continue;
        if (in.st_dev == out.st_dev && in.st_ino == out.st_ino) {
            throw UserError(exit_usage, "--output " + o.output + " is the same file as " + *input +
                                            ", expected a different path (inputs are never overwritten, even with --force)");
        }
    }
}

}  // namespace

int run_command(const std::vector<std::string>& args) {
    MpiSession mpi;
    const RunOptions o = parse_run_options(args);
    if (o.stop) return exit_ok;
    check_output_path(o);
    if (mpi.size() > 1) {
        throw UserError(exit_usage, "running on " + std::to_string(mpi.size()) +
                                        " MPI ranks is not supported by this build yet (expected 1 rank); "
                                        "hint: use mpirun -np 1 and --threads for now");
    }
    const double t_start = MPI_Wtime();

    io::InputSpec spec;
    std::optional<io::ProjectionWeights> weights;
    io::OutputLayout layout;
    try {
        spec = io::describe_input(o.input);
        if (spec.weights) weights = io::read_weights(*spec.weights);
        layout = io::output_layout_for(spec);
    } catch (...) {
        rethrow_as_user_error();
    }
    layout.save_weights = o.save_weights;
    layout.weights_dtype = o.weights_dtype;
    layout.gzip_level = o.gzip_level;
    if (o.weights_seqs_given) {
        if (o.weights_last > spec.n) {
            throw UserError(exit_usage, "--weights-seqs " + std::to_string(o.weights_first) + ":" +
                                            std::to_string(o.weights_last) + " ends past N = " + std::to_string(spec.n) +
                                            " (expected A < B <= N)");
        }
        layout.weights_first = o.weights_first;
        layout.weights_last = o.weights_last;
    }

    kernels::KernelOptions kernel = o.kernel;
#if defined(_OPENMP)
    if (kernel.threads <= 0) kernel.threads = omp_get_max_threads();
#else
    kernel.threads = 1;
#endif
    dist::AttentionSettings settings;
    settings.causal = o.causal;
    settings.scale = o.scale > 0 ? static_cast<float>(o.scale) : static_cast<float>(1.0 / std::sqrt(static_cast<double>(spec.d_k)));
    settings.kernel = kernel;

    const io::OutputSizes sizes = io::estimate_output_bytes(layout);
    const dist::MemoryModel memory = dist::memory_model(spec, layout, kernel);
    std::int64_t unit = 0;
    try {
        unit = dist::sequences_per_unit(memory, o.max_memory, spec.n, 1);
        if (o.unit_sequences > 0) unit = std::min<std::int64_t>(unit, o.unit_sequences);
    } catch (...) {
        rethrow_as_user_error();
    }
    std::cout << "attnbatch run: " << spec.path << " N=" << spec.n << " L=" << spec.len << " H=" << spec.heads
              << " d_k=" << spec.d_k << " d_v=" << spec.d_v << (o.causal ? " causal" : "") << " -> " << o.output << '\n'
              << "  output " << dist::format_bytes(static_cast<double>(sizes.output + sizes.lse + sizes.lengths))
              << ", weights " << dist::format_bytes(static_cast<double>(sizes.attention)) << " ("
              << io::name_of(layout.save_weights) << ", " << io::name_of(layout.weights_dtype) << ")"
              << (layout.gzip_level ? " before gzip" : "") << "; units of " << unit << " sequences under --max-memory "
              << dist::format_bytes(static_cast<double>(o.max_memory)) << '\n';
    if (o.dry_run) {
        const std::int64_t units = (spec.n + unit - 1) / unit;
        std::cout << "  plan: " << units << " units on 1 rank, predicted imbalance 0%; dry run: nothing written\n";
        return exit_ok;
    }
    if (layout.gzip_level == 0) {
        std::uint64_t free_bytes = 0;
        try {
            free_bytes = io::free_bytes_at(o.output);
        } catch (...) {
            rethrow_as_user_error();
        }
        if (sizes.total() > free_bytes) {
            throw UserError(exit_usage, o.output + ": the output needs " + dist::format_bytes(static_cast<double>(sizes.total())) +
                                            " but its file system has " + dist::format_bytes(static_cast<double>(free_bytes)) +
                                            " free; hint: --save-weights mean|none, --weights-dtype f16, --weights-seqs A:B or "
                                            "--compression gzip shrink it");
        }
    }
    if (o.resume) {
        if (::access(o.output.c_str(), F_OK) == 0) {
            std::cout << "  " << o.output << " is already complete; nothing to resume\n";
            return exit_ok;
        }
        if (::access(io::OutputFile::partial_path_for(o.output).c_str(), F_OK) == 0) {
            throw UserError(exit_usage, io::OutputFile::partial_path_for(o.output) +
                                            ": continuing a partial output is not supported by this build yet; "
                                            "hint: rerun with --force to start again");
        }
    }

    io::Provenance provenance;
    provenance.version = ATTNBATCH_VERSION;
    provenance.creation_time = now_iso8601();
    provenance.input_file = spec.path;
    provenance.input_dataset = spec.mode == io::InputMode::embeddings ? spec.dataset : spec.query + "," + spec.key + "," + spec.value;
    provenance.heads = spec.heads;
    provenance.causal = o.causal;
    provenance.scale = settings.scale;
    provenance.ranks = mpi.size();
    provenance.threads = kernel.threads;
    provenance.io_mode = o.io_mode;
    provenance.config = o.resolved_config;

    dist::PhaseTimes times;
    try {
        io::OutputOptions output_options;
        output_options.force = o.force;
        io::OutputFile output = io::OutputFile::create(o.output, layout, provenance, output_options);
        io::InputReader reader(spec);
        const std::int64_t chunk = output.sequences_per_chunk();
        if (unit > chunk && o.unit_sequences == 0) unit = unit / chunk * chunk;
        times = dist::run_sequences(spec, weights, settings, reader, output, 0, spec.n, unit);
        const double t0 = MPI_Wtime();
        output.finalize();
        times.write += MPI_Wtime() - t0;
    } catch (...) {
        rethrow_as_user_error();
    }
    const double total = MPI_Wtime() - t_start;
    const double flops = times.attention_flops + times.projection_flops;
    if (!o.report.empty()) write_report(o.report, o, times, total, unit, kernel.threads);
    std::cout << std::fixed << std::setprecision(3) << "  done: " << times.units << " units, " << times.sequences
              << " sequences in " << total << " s (read " << times.read << ", compute " << times.compute << ", write "
              << times.write << ")\n"
              << "PERFORMANCE ranks=1 threads=" << kernel.threads << " sequences=" << times.sequences
              << " tokens=" << times.tokens << " seconds=" << total << " seqs_per_s=" << std::setprecision(1)
              << static_cast<double>(times.sequences) / total << " compute_gflops=" << (times.compute > 0 ? flops / times.compute * 1e-9 : 0.0)
              << " end_to_end_gflops=" << flops / total * 1e-9 << '\n';
    return exit_ok;
}

}  // namespace attnbatch::cli
