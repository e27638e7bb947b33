#include "attnbatch/distributed/job.hpp"

#include <sys/stat.h>

#include <climits>
#include <cstdlib>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "attnbatch/distributed/agreement.hpp"
#include "attnbatch/distributed/backend_agreement.hpp"
#include "attnbatch/distributed/job_identity.hpp"
#include "attnbatch/distributed/schedule.hpp"
#include "attnbatch/distributed/spec_codec.hpp"
#include "attnbatch/distributed/step_io.hpp"
#include "attnbatch/distributed/stop_point.hpp"
#include "attnbatch/distributed/stop_request.hpp"
#include "attnbatch/error.hpp"
#include "attnbatch/io/h5/file_paths.hpp"
#include "attnbatch/kernels/threads.hpp"
#include "attnbatch/io/input/value_scan.hpp"
#include "attnbatch/io/output/fault_injection.hpp"
#include "wall_clock.hpp"


namespace attnbatch::distributed {

namespace {

// Rounds wanted at least, so that reading and writing hide behind compute (with R rounds
// about 1/R of the I/O stays exposed).
constexpr int kMinRounds = 8;
// A step's predicted cost is capped at this many seconds of compute at a conservative speed
// per thread, so that a stop signal is answered within about one step.
constexpr double kMaxStepSeconds = 10.0;
constexpr double kAssumedFlopsPerThread = 20e9;
// The long phases go in slices of this many bytes per rank, a fraction of a second each even
// from a slow file system, with a stop point after each.
constexpr std::uint64_t kSliceBytes = std::uint64_t{64} << 20;

// The output must be a new file path, never the input or the weights (--force would otherwise
// replace them) and never a directory (found out only at the final rename, after the work).
// A step's predicted cost is capped (see kMaxStepSeconds); a sequence costlier than that is
// cut into pieces.
double max_step_cost(const Job& job) {
    return kMaxStepSeconds * kAssumedFlopsPerThread * job.attention.kernel.threads;
}

CostModel cost_model_for(const io::InputSpec& spec, bool causal) {
    CostModel model;
    model.heads = spec.heads;
    model.kv_heads = spec.kv_head_count();
    model.d_k = spec.d_k;
    model.d_v = spec.d_v;
    model.causal = causal;
    if (spec.weights) {
        model.d_in = spec.weights->d_in;
        model.d_out = spec.weights->has_w_o ? spec.weights->d_out : 0;
    }
    return model;
}

// Adds the wall time `work` takes to `seconds`.
template <class Work>
void timed(double& seconds, Work&& work) {
    const double start = wall_seconds();
    work();
    seconds += wall_seconds() - start;
}

// The sequences a rank's share spans (contiguous shares: exactly its sequences).
std::pair<std::int64_t, std::int64_t> share_span(const std::vector<Unit>& units, const RankShare& share) {
    if (share.units.empty()) return {0, 0};
    return {units[static_cast<std::size_t>(share.units.front())].first,
            units[static_cast<std::size_t>(share.units.back())].last};
}

std::string range_syntax(std::int64_t first, std::int64_t last) {
    return std::to_string(first) + ":" + std::to_string(last);
}

// --sequences: [first, last) of the N stored sequences (last -1: up to N); exit 2 past N.
std::pair<std::int64_t, std::int64_t> selected_sequences(const SequenceRange& range, std::int64_t n) {
    const std::int64_t last = range.last < 0 ? n : range.last;
    if (range.first < 0 || range.first >= last || last > n) {
        throw Error(exit_usage, "--sequences " + range_syntax(range.first, last) + " ends past N = " + std::to_string(n) +
                                    " (expected 0 <= A < B <= N; the input has sequences 0 to " + std::to_string(n - 1) +
                                    ")");
    }
    return {range.first, last};
}

// Each node's memory shared by its own ranks (the default --max-memory), and whether the
// threads of those ranks outnumber its cores. The same on every rank: the worst node decides.
void assess_resources(Job& job) {
    Comm& comm = job.comm;
    const NodeResources node = node_resources();
    const int on_node = comm.ranks_on_node();
    job.nodes = node_shares(comm, node);
    const auto share_of = [](const NodeShare& n) {
        NodeResources resources;
        resources.memory = n.memory;
        return default_max_memory(resources, n.ranks);
    };
    if (job.settings.max_memory == 0) {
        // Every rank gets the smallest share any node gives: units are sized the same on all.
        job.settings.max_memory = std::numeric_limits<std::size_t>::max();
        for (const NodeShare& n : job.nodes) job.settings.max_memory = std::min(job.settings.max_memory, share_of(n));
    }
    for (std::size_t i = 0; i < job.nodes.size(); ++i) {
        const NodeShare& n = job.nodes[i];
        const double wanted = static_cast<double>(n.ranks) * static_cast<double>(job.settings.max_memory);
        if (wanted <= static_cast<double>(n.memory)) continue;
        job.warnings.push_back((n.name.empty() ? "node " + std::to_string(i) : n.name) + ": " + std::to_string(n.ranks) +
                               " rank(s) x --max-memory " + format_bytes(static_cast<double>(job.settings.max_memory)) +
                               " = " + format_bytes(wanted) + ", more than its " + format_bytes(static_cast<double>(n.memory)) +
                               " (" + name_of(n.memory_source) + "); hint: --max-memory " +
                               format_bytes(static_cast<double>(share_of(n))) + " (its default share)");
        break;  // the first such node says enough
    }
    if (job.settings.dry_run && job.settings.simulate_ranks > 0) return;  // nothing runs here
    const std::int64_t threads = kernels::resolved_threads(job.settings.kernel.threads);
    // Per node: ranks x threads - cores; per rank: threads beyond its CPU affinity.
    const std::int64_t over_node = comm.max(on_node * threads - node.cores);
    const std::int64_t worst_node_threads = comm.max(on_node * threads);
    const std::int64_t over_affinity = comm.max(threads - node.affinity_cores);
    if (over_node > 0) {
        const std::int64_t ranks = worst_node_threads / threads, cores = worst_node_threads - over_node;
        const std::string hint = threads > 1 && ranks <= cores
                                     ? "--threads " + std::to_string(std::max<std::int64_t>(1, cores / ranks))
                                     : "at most " + std::to_string(cores) + " ranks per node (mpirun --map-by ppr:" +
                                           std::to_string(cores) + ":node)";
        job.warnings.push_back(std::to_string(ranks) + " ranks x " + std::to_string(threads) + " threads share a node with " +
                               std::to_string(cores) + " cores: the threads compete for cores and the run slows down; hint: " +
                               hint);
    } else if (over_affinity > 0) {
        job.warnings.push_back("a rank may run on only " + std::to_string(threads - over_affinity) + " core(s) (its CPU "
                               "affinity) but has " + std::to_string(threads) + " threads; hint: mpirun --bind-to none, or "
                               "--map-by slot:PE=" + std::to_string(threads) + " --bind-to core");
    }
}

// Rank 0 validates shapes, types and lengths and every other rank receives what it found;
// the data values are scanned later, each rank its own share.
void describe(Job& job) {
    Comm& comm = job.comm;
    agreed(comm, comm.is_root(), [&] {
        io::InputOptions input = job.settings.input;
        input.check_finite = false;
        job.spec = io::describe_input(input);
        job.stored_sequences = job.spec.n;
        if (job.settings.sequences) {
            const auto [first, last] = selected_sequences(*job.settings.sequences, job.spec.n);
            io::select_sequences(job.spec, first, last);
        }
        if (job.spec.weights) job.weights = io::read_weights(*job.spec.weights);
    });
    broadcast_spec(comm, job.spec, 0);
    broadcast_weights(comm, job.weights, 0);
}

void read_lengths(Job& job) {
    Comm& comm = job.comm;
    agreed(comm, comm.is_root(), [&] {
        io::InputReader lengths_reader(job.spec);
        job.lengths = lengths_reader.read_all_lengths();
    });
    broadcast_vector(comm, job.lengths, 0);
}

void lay_out(Job& job) {
    const JobSettings& s = job.settings;
    job.layout = io::output_layout_for(job.spec);
    job.layout.save_weights = s.save_weights;
    job.layout.weights_dtype = s.weights_dtype;
    job.layout.gzip_level = s.gzip_level;
    job.layout.first_sequence = job.spec.first_sequence;
    agreed(job.comm, true, [&] {
        if (!s.weights_sequences) return;
        // Input sequence numbers, within the sequences this run computes; the layout counts rows.
        const SequenceRange& range = *s.weights_sequences;
        const std::int64_t first_row = job.spec.first_sequence, end_row = job.spec.first_sequence + job.spec.n;
        const std::int64_t last = range.last < 0 ? end_row : range.last;
        if (range.first < first_row || last > end_row || range.first >= last) {
            throw Error(exit_usage, "--weights-seqs " + range_syntax(range.first, last) +
                                        (s.sequences ? " is not within the sequences computed, --sequences " +
                                                           range_syntax(first_row, end_row)
                                                     : " ends past N = " + std::to_string(job.spec.n)) +
                                        " (expected " + std::to_string(first_row) + " <= A < B <= " +
                                        std::to_string(end_row) + ")");
        }
        job.layout.weights_first = range.first - first_row;
        job.layout.weights_last = last - first_row;
    });
    if (job.spec.packed) {
        // Where each sequence's rows are, in the packed output as in the input.
        auto offsets = std::make_shared<std::vector<std::int64_t>>(job.lengths.size() + 1, 0);
        for (std::size_t i = 0; i < job.lengths.size(); ++i) (*offsets)[i + 1] = (*offsets)[i] + job.lengths[i];
        job.layout.packed = true;
        job.layout.offsets = std::move(offsets);
    }
    // What OutputFile::create will check, here too so that --dry-run refuses it as the run would.
    agreed(job.comm, true, [&] { io::check_output_layout(job.layout, s.output); });
    job.sizes = io::estimate_output_bytes(job.layout);

    // A dry run for --simulate-ranks P sizes the job those P ranks would run.
    job.plan_ranks = s.dry_run && s.simulate_ranks > 0 ? s.simulate_ranks : job.comm.size();
    job.io_mode = s.io_mode != IoMode::automatic ? s.io_mode : job.plan_ranks > 1 ? IoMode::parallel : IoMode::gather;
    job.attention.spec = s.attention.resolved(job.spec.d_k);
    job.attention.kernel = s.kernel;
    job.attention.kernel.threads = kernels::resolved_threads(s.kernel.threads);
    job.attention.kernel.precision = s.attention.precision;
    std::string backend_warning;
    agreed(job.comm, true, [&] { backend_warning = agree_on_backend(job.comm, job.attention.kernel); });
    if (!backend_warning.empty()) job.warnings.push_back(backend_warning);
    agreed(job.comm, true, [&] {
        if (s.attention.rotary() && job.spec.d_k % 2 != 0) {
            throw Error(exit_usage, "--rope-theta needs an even d_k (rotary embeddings turn pairs of columns), but d_k = " +
                                        std::to_string(job.spec.d_k) + "; hint: drop --rope-theta or check --heads");
        }
    });
}

// The step size from the memory bound, and the journal's identity of this job.
void size_steps(Job& job) {
    const JobSettings& s = job.settings;
    Comm& comm = job.comm;
    const int in_flight = job.io_mode == IoMode::gather && job.plan_ranks > 1 ? 3 : 2;
    const MemoryModel memory = memory_model(job.spec, job.layout, job.attention.kernel, in_flight, job.attention.spec.rotary());
    RowMemory rows = row_memory(job.spec, job.layout, memory, s.max_memory, in_flight);
    agreed(comm, true, [&] {
        // Padded sequences are all alike: when one fits, steps are counted in sequences as
        // ever. When one does not (its attention maps, say), or lengths vary (packed), steps
        // are measured in bytes and a sequence too big for one is cut into row slabs.
        bool whole_fits = !job.spec.packed;
        if (job.spec.packed) {
            job.max_sequences = job.spec.n;
        } else {
            try {
                job.max_sequences = sequences_per_step(memory, s.max_memory, job.spec.n);
            } catch (const Error&) {
                whole_fits = false;
                job.max_sequences = 1;
            }
        }
        if (whole_fits) rows.budget = 0;
        else check_sequences_fit(job.lengths, memory, rows, s.max_memory);
        if (s.unit_sequences > 0) job.max_sequences = std::min<std::int64_t>(job.max_sequences, s.unit_sequences);
    });
    job.max_step_bytes = rows.budget;
    if (job.layout.gzip_level > 0) {
        // A quarter of a step of the static schedule (kMinRounds per rank's share, or fewer
        // sequences where memory caps a step): its steps then end on chunk bounds (split_share),
        // so each compressed chunk is written once (OutputLayout::chunk_sequences).
        const std::int64_t per_round = (job.spec.n + std::int64_t{job.plan_ranks} * kMinRounds - 1) /
                                       (std::int64_t{job.plan_ranks} * kMinRounds);
        job.layout.chunk_sequences = std::max<std::int64_t>(1, std::min(job.max_sequences, per_round) / 4);
    }
    job.split.ranks = job.plan_ranks;
    job.split.max_piece_cost = max_step_cost(job);
    job.split.padded_rows = job.spec.packed ? 0 : job.spec.len;
    job.split.memory = rows;
    // The journal's identity: rank 0 reads the files' metadata, every rank records the same.
    if (comm.is_root()) {
        job.identity = job_identity(job.spec, job.weights, job.lengths, job.attention, job.layout);
        // Only a narrowed run says so, so that every other identity stays as it was recorded.
        if (job.spec.n != job.stored_sequences) {
            job.identity += "sequences = " + range_syntax(job.spec.first_sequence, job.spec.first_sequence + job.spec.n) + '\n';
        }
    }
    broadcast_string(comm, job.identity, 0);
}

// --resume: rank 0 inspects the partial output in slices, the other ranks wait in the stop
// points between them.
void inspect_partial(Job& job) {
    const JobSettings& s = job.settings;
    Comm& comm = job.comm;
    std::unique_ptr<ResumeInspection> inspection;
    agreed_in_slices(comm, comm.is_root(), [&] {
        if (!inspection) {
            inspection = std::make_unique<ResumeInspection>(s.output, s.force, job.layout, job.identity, s.dry_run);
        }
        return inspection->verify_some(kSliceBytes);
    });
    if (inspection) job.resume = inspection->result();
    broadcast_resume(comm, job.resume);
    // A job requeued with --resume publishes as the run that started it asked.
    if (!s.fsync && job.resume.state == ResumeState::partial && job.resume.recorded_fsync >= 0) {
        job.fsync = job.resume.recorded_fsync != 0;
    }
}

// With --resume, a stop agreed on before the inspection: if OUTPUT is already complete
// (what the inspection would have found) there is nothing to interrupt.
bool already_complete(Job& job) {
    const JobSettings& s = job.settings;
    std::int64_t complete = 0;
    if (job.comm.is_root()) {
        struct stat status {};
        const bool output = ::lstat(s.output.c_str(), &status) == 0;
        const bool partial = ::lstat(io::partial_path_for(s.output).c_str(), &status) == 0;
        complete = output && !(partial && s.force) ? 1 : 0;
    }
    job.comm.broadcast(&complete, sizeof complete, 0);
    if (complete != 0) {
        job.resume.state = ResumeState::complete;
        job.resume.summary = s.output + " is already complete; nothing to resume";
    }
    return complete != 0;
}

// Units sized by the memory bound and formed the same way whatever the number of ranks; a
// resumed job takes over the units of its journal instead.
void form_job_units(Job& job) {
    const JobSettings& s = job.settings;
    Comm& comm = job.comm;
    const CostModel cost = cost_model_for(job.spec, s.attention.causal);
    // A dry run that could not read a short .partial's journal plans as a fresh run would.
    if (job.resume.state != ResumeState::partial || job.resume.unit_bounds.empty()) {
        job.all_units = form_units(job.lengths, cost, job.max_sequences, job.split);
        job.units = job.all_units;
        return;
    }
    agreed(comm, true, [&] { job.all_units = resumed_units(job.lengths, cost, job.resume, job.max_sequences, job.split); });
    for (std::size_t u = 0; u < job.all_units.size(); ++u) {
        const Unit& unit = job.all_units[u];
        if (!job.resume.done[u]) {
            job.units.push_back(unit);
            continue;
        }
        job.done_before.units += 1;
        job.done_before.sequences += unit.sequences_done();
        job.done_before.cost += unit.cost;
    }
}

void plan_job(Job& job) {
    // The static plan also tells each rank which values to scan under --io parallel.
    job.plan = plan_static(job.units, job.plan_ranks, StaticStrategy::contiguous);
    job.predicted = job.settings.schedule == ScheduleKind::dynamic ? simulate_dynamic(job.units, job.plan_ranks) : job.plan;
}

void check_free_space(Job& job) {
    const JobSettings& s = job.settings;
    agreed(job.comm, job.comm.is_root(), [&] {
        if (job.layout.gzip_level != 0 || job.resume.state == ResumeState::partial) return;  // a partial holds its space
        const std::uint64_t free_bytes = io::free_bytes_at(s.output);
        if (job.sizes.total() > free_bytes) {
            throw Error(exit_usage, s.output + ": the output needs " + format_bytes(static_cast<double>(job.sizes.total())) +
                                        " but its file system has " + format_bytes(static_cast<double>(free_bytes)) +
                                        " free; hint: --save-weights mean|none, --weights-dtype f16, --weights-seqs A:B or "
                                        "--compression gzip shrink it");
        }
    });
}

std::int64_t input_bytes_per_sequence(const io::InputSpec& spec) {
    const std::int64_t element = spec.dtype == io::DataType::float64 ? 8 : 4;
    const std::int64_t width = spec.mode == io::InputMode::embeddings ? spec.d : spec.heads * (2 * spec.d_k + spec.d_v);
    return std::max<std::int64_t>(1, spec.len * width * element);
}

// Where a slice of the value scan that starts at sequence `first` ends: about kSliceBytes of
// input, at least one sequence. A padded sequence reads all its L rows; a packed one only its
// own, so that a heavy-tailed packed set (L the longest of thousands) is not scanned a few
// short sequences at a time, each slice an agreement of every rank.
std::int64_t slice_end(const Job& job, std::int64_t first, std::int64_t last) {
    const std::int64_t sequence_bytes = input_bytes_per_sequence(job.spec);
    if (!job.spec.packed) {
        return std::min(last, first + std::max<std::int64_t>(1, static_cast<std::int64_t>(kSliceBytes) / sequence_bytes));
    }
    const std::int64_t row_bytes = std::max<std::int64_t>(1, sequence_bytes / std::max<std::int64_t>(1, job.spec.len));
    std::int64_t end = first, bytes = 0;
    while (end < last && (end == first || bytes < static_cast<std::int64_t>(kSliceBytes))) {
        bytes += job.lengths[static_cast<std::size_t>(end)] * row_bytes;
        ++end;
    }
    return end;
}

// Every value checked before any compute: in parallel each rank scans its own share. In
// slices, with the weights last, so that the first bad value named is the one a single
// pass over the data and then the weights would name. One scanner opens the files once.
void scan_values(Job& job) {
    Comm& comm = job.comm;
    const bool parallel = job.io_mode == IoMode::parallel;
    std::int64_t first = 0, last = job.spec.n;
    if (parallel) std::tie(first, last) = share_span(job.units, job.plan.ranks[static_cast<std::size_t>(comm.rank())]);
    std::optional<io::ValueScanner> scanner;
    std::int64_t next = first;
    agreed_in_slices(comm, comm.is_root() || parallel, [&] {
        if (!scanner) scanner.emplace(job.spec, job.settings.input.scan_bytes);
        const std::int64_t end = slice_end(job, next, last);
        scanner->scan_sequences(next, end);
        next = end;
        if (next >= last && comm.is_root()) scanner->scan_weights();
        return next >= last;
    });
}

// Whether the rounds' reads check the values instead of a scan of their own before the
// output is created: a second read of every input byte, 0.1-0.3 s per 100 MiB here, before
// the first compute. The reads see every value as stored when the data is float32 or
// narrower and every unit is whole sequences (padding included); a piece reads only its
// rows, and float64 beyond float32's range is no longer itself once read as float32, so those
// jobs keep the scan.
bool scan_in_reads(const Job& job) {
    if (job.spec.dtype == io::DataType::float64) return false;
    return std::none_of(job.units.begin(), job.units.end(), [](const Unit& unit) { return unit.piece(); });
}

// The value check before the rounds: the whole scan, or only the projection weights (rank 0)
// when the reads check the data. Bad weights then get the whole scan too, so that the value
// named is the one the whole scan would name (the data come before the weights).
void check_values_before_rounds(Job& job) {
    if (!scan_in_reads(job)) return scan_values(job);
    try {
        agreed(job.comm, job.comm.is_root(), [&] {
            io::ValueScanner(job.spec, job.settings.input.scan_bytes).scan_weights();
        });
    } catch (const AgreedFailure& failure) {
        if (failure.exit_code() != exit_invalid_input) throw;
        scan_values(job);
        throw;
    }
}

// A bad value found by the rounds' reads (exit 3, the output created and closed): the
// output of a fresh run is removed, as the run never completes with this input, and the
// whole scan names the first bad value, the one a scan before the rounds would have named.
void name_first_bad_value(Job& job) {
    if (job.resume.state != ResumeState::partial && job.comm.is_root()) {
        try {
            io::discard_partial_output(job.settings.output);
        } catch (const Error&) {
            // Left behind, it is refused as stale by the next run, which names it; the bad
            // value is what this run must report.
        }
    }
    scan_values(job);
}

// The input and weights files are recorded by their real path (io::real_path), as the
// journal's identity names them, so that verify and weights find them from any directory.
io::Provenance provenance_of(const Job& job) {
    const JobSettings& s = job.settings;
    io::Provenance provenance;
    provenance.version = s.version;
    provenance.creation_time = io::creation_time_now();
    provenance.input_file = job.spec.path;
    provenance.input_file_absolute = io::real_path(job.spec.path);
    if (job.spec.weights) {
        provenance.weights_file = job.spec.weights->path;
        provenance.weights_file_absolute = io::real_path(job.spec.weights->path);
    }
    provenance.input_dataset = job.spec.mode == io::InputMode::embeddings
                                   ? job.spec.dataset
                                   : job.spec.query + "," + job.spec.key + "," + job.spec.value;
    provenance.heads = job.spec.heads;
    provenance.kv_heads = job.spec.kv_head_count();
    provenance.d_k = job.spec.d_k;
    provenance.d_v = job.spec.d_v;
    provenance.attention = job.attention.spec;
    provenance.ranks = job.comm.size();
    provenance.threads = job.attention.kernel.threads;
    provenance.io_mode = name_of(job.io_mode);
    provenance.config = s.recorded_config;
    return provenance;
}

// The rounds' reader: their reads check the values when no scan did before, and leave the
// rows in place where the input allows.
std::unique_ptr<io::InputReader> open_step_reader(const Job& job) {
    auto reader = std::make_unique<io::InputReader>(job.spec);
    reader->check_values(scan_in_reads(job));
    reader->read_in_place(true);
    return reader;
}

// Creates (or, resuming, reopens) OUTPUT.partial and the reader, wrapped in the StepIo of the
// job's I/O mode.
std::unique_ptr<StepIo> open_step_io(Job& job) {
    const JobSettings& s = job.settings;
    Comm& comm = job.comm;
    const bool root = comm.is_root();
    io::Provenance provenance = provenance_of(job);
    // Attributes must match on every rank (a rank may even start in another directory).
    broadcast_string(comm, provenance.creation_time, 0);
    broadcast_string(comm, provenance.input_file_absolute, 0);
    broadcast_string(comm, provenance.weights_file_absolute, 0);

    io::OutputOptions output_options;
    output_options.force = s.force;
    output_options.fsync = job.fsync;
    output_options.journal = io::JournalPlan{unit_bounds_of(job.all_units), job.identity, unit_rows_of(job.all_units)};
    const bool continuing = job.resume.state == ResumeState::partial;
    const auto open_output = [&](const io::FileAccess& access) {
        if (continuing) {
            auto reopened = std::make_unique<io::OutputFile>(io::OutputFile::reopen(s.output, job.layout, access));
            reopened->set_fsync(job.fsync);
            return reopened;
        }
        return std::make_unique<io::OutputFile>(io::OutputFile::create(s.output, job.layout, provenance, output_options));
    };
    std::unique_ptr<io::OutputFile> output;
    std::unique_ptr<io::InputReader> reader;
    if (job.io_mode != IoMode::parallel) {
        agreed(comm, root, [&] {
            output = open_output(output_options.access);
            reader = open_step_reader(job);  // gather: rank 0 copies what it sends on
        });
        return make_gather_io(comm, job.spec, job.layout, std::move(reader), std::move(output));
    }

    if (!continuing) agreed(comm, root, [&] { io::prepare_output_path(s.output, s.force); });
    output_options.paths_prepared = true;
    agreed(comm, true, [&] { output_options.access = comm.collective_file_access(); });
    output_options.writer = comm.rank();
    output_options.writers = comm.size();
    // Collective: a failure here is the same on every rank, or the job cannot go on.
    LocalFailure failure;
    record_failure(failure, [&] { output = open_output(output_options.access); });
    const AgreedError created = agree(comm, failure.code, failure.message);
    if (created.code != 0 && output) abort_job(comm, created.code, created.message);
    if (created.code != 0) throw AgreedFailure(created.code, created.message);
    agreed(comm, true, [&] { reader = open_step_reader(job); });
    return make_parallel_io(comm, std::move(reader), std::move(output), s.force);
}

JobResult summarize(RunResult rounds, double wall) {
    JobResult result;
    result.wall_seconds = wall;
    double io = 0, exposed = 0;
    for (const RankTimes& t : rounds.ranks) {
        result.sum.sequences += t.sequences;
        result.sum.tokens += t.tokens;
        result.sum.attention_flops += t.attention_flops;
        result.sum.projection_flops += t.projection_flops;
        result.sum.read += t.read;
        result.sum.write += t.write;
        result.sum.communicate += t.communicate;
        result.sum.wait += t.wait;
        result.sum.compute += t.compute;
        result.slowest_compute = std::max(result.slowest_compute, t.compute);
        const double mine = t.read + t.write + t.communicate;
        io += mine;
        exposed += std::min(mine, t.exposed);
    }
    const double ranks = static_cast<double>(rounds.ranks.size());
    result.imbalance = result.sum.compute > 0 ? result.slowest_compute / (result.sum.compute / ranks) - 1.0 : 0.0;
    result.io_hidden = io > 0 ? 1.0 - exposed / io : 1.0;
    result.rounds = std::move(rounds);
    return result;
}

// Each phase's time on the rank that took longest: the job's phases from `job` and the
// rounds' from `rounds`, gathered from every rank.
PhaseTimes slowest_phases(Comm& comm, const PhaseTimes& job, const PhaseTimes& rounds) {
    PhaseTimes mine = job;
    mine.first_read = rounds.first_read;
    mine.rounds = rounds.rounds;
    mine.last_write = rounds.last_write;
    mine.close = rounds.close;
    mine.publish = rounds.publish;
    const std::vector<double> all = comm.all_gather(mine.pack());
    PhaseTimes slowest;
    for (int r = 0; r < comm.size(); ++r) {
        slowest = PhaseTimes::slowest(slowest, PhaseTimes::unpack(all.data() + static_cast<std::size_t>(r) * PhaseTimes::fields));
    }
    return slowest;
}

}  // namespace

const char* name_of(IoMode mode) {
    switch (mode) {
        case IoMode::automatic: return "auto";
        case IoMode::gather: return "gather";
        case IoMode::parallel: return "parallel";
    }
    return "?";
}

const char* name_of(ScheduleKind kind) { return kind == ScheduleKind::dynamic ? "dynamic" : "static"; }

Job prepare_job(Comm& comm, const JobSettings& settings) {
    Job job(comm);
    job.settings = settings;
    job.fsync = settings.fsync.value_or(true);
    job.started_at = wall_seconds();
    install_stop_handlers();  // main() did it for the binary; a library caller gets it here
    const bool resuming = settings.resume;
    agreed(comm, true, [&] { io::arm_fault_from_environment(comm.rank()); });
    try {
        begin_phase(comm, Phase::validation);
        timed(job.phases.describe, [&] {
            agreed(comm, comm.is_root(), [&] {
                io::check_output_is_not_an_input(job.settings.output, {{"--input", job.settings.input.input_path},
                                                                       {"--weights", job.settings.input.weights_path}});
            });
            assess_resources(job);
            describe(job);
        });
        begin_phase(comm, Phase::lengths);
        timed(job.phases.lengths, [&] { read_lengths(job); });
        timed(job.phases.plan, [&] {
            lay_out(job);
            size_steps(job);
            if (resuming) {
                begin_phase(comm, Phase::resume_verification);
                inspect_partial(job);
            }
        });
    } catch (const AgreedFailure& failure) {
        if (failure.exit_code() != exit_interrupted || !resuming || !already_complete(job)) throw;
        return job;
    }
    if (job.nothing_to_do()) return job;
    begin_phase(comm, Phase::planning);
    timed(job.phases.plan, [&] {
        form_job_units(job);
        plan_job(job);
    });
    return job;
}

void preflight(Job& job) {
    const JobSettings& s = job.settings;
    agreed(job.comm, job.comm.is_root(), [&] {
        io::check_output_target(s.output, s.force, job.resume.state == ResumeState::partial);
    });
    // A dry run for --simulate-ranks sizes a job for another machine (no real run takes that
    // option), so this file system's free space is news, not a verdict.
    if (s.simulate_ranks > 0) {
        try {
            check_free_space(job);
        } catch (const AgreedFailure& failure) {
            if (failure.exit_code() != exit_usage) throw;
            job.notes.push_back(std::string("note: ") + failure.what());
        }
        return;
    }
    check_free_space(job);
}

namespace {

// For the handlers of an exception `e` one rank met alone, while the output is open: the rank
// ends the job here, before the output's destructor could start a collective close that the
// other ranks (in a round's agreement, or the next one) would never join. An Error (the final
// flush or rename on a full disk) keeps its exit code; anything else is a bug. On one rank the
// exception goes on, and the output is closed resumable on the way out.
[[noreturn]] void fail_alone(Comm& comm, const std::exception& e) {
    if (comm.size() == 1) throw;  // the exception being handled
    const auto* error = dynamic_cast<const Error*>(&e);
    abort_job(comm, error ? error->exit_code() : exit_internal, (error ? "" : "internal error: ") + std::string(e.what()));
}

}  // namespace

JobResult run_job(Job& job, const RoundCallback& on_round) {
    Comm& comm = job.comm;
    timed(job.phases.preflight, [&] { preflight(job); });
    begin_phase(comm, Phase::value_scan);
    timed(job.phases.value_scan, [&] { check_values_before_rounds(job); });
    begin_phase(comm, Phase::output_creation);
    std::unique_ptr<StepIo> step_io;
    timed(job.phases.output_creation, [&] { step_io = open_step_io(job); });
    try {
        begin_phase(comm, Phase::rounds);
    } catch (const AgreedFailure&) {
        step_io->abandon();  // created, and closed resumable like any interrupted output
        throw;
    } catch (const std::exception& e) {
        fail_alone(comm, e);
    }

    const double step_cost = max_step_cost(job);
    RunResult rounds;
    try {
        std::unique_ptr<Scheduler> scheduler =
            job.settings.schedule == ScheduleKind::dynamic
                ? make_dynamic_scheduler(job.units, comm.size(), job.max_sequences, kMinRounds, step_cost, job.max_step_bytes,
                                         io::sequence_chunks(job.layout))
                : make_static_scheduler(
                      static_rounds(job.units, job.plan, job.max_sequences, kMinRounds, step_cost, job.max_step_bytes,
                                    io::sequence_chunks(job.layout)));
        RunContext context{job.spec, job.weights, job.attention, job.layout};
        context.on_round = on_round;
        rounds = run_rounds(comm, context, *scheduler, *step_io);
        step_io.reset();
    } catch (const AgreedFailure& failure) {
        // Every rank closed the output together and leaves together.
        if (failure.exit_code() == exit_invalid_input && scan_in_reads(job)) {
            step_io.reset();
            name_first_bad_value(job);
        }
        throw;
    } catch (const std::exception& e) {
        fail_alone(comm, e);
    }
    JobResult result = summarize(std::move(rounds), wall_seconds() - job.started_at);
    result.phases = slowest_phases(comm, job.phases, result.rounds.phases);
    return result;
}

}  // namespace attnbatch::distributed
