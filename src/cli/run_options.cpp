#include "run_options.hpp"

#include <cctype>
#include <cmath>
#include <limits>
#include <optional>

#include "amx_permission.hpp"
#include "command_line.hpp"
#include "attnbatch/kernels/threads.hpp"
#include "ranges.hpp"

namespace attnbatch::cli {

namespace {

// One block of the RANGE syntax (ranges.hpp); the open end (-1) is resolved against N by the job.
distributed::SequenceRange parse_sequence_block(const std::string& text, const std::string& option) {
    const IndexRange range = parse_block(text, option);
    return {range.first, range.last.value_or(-1)};
}

int parse_compression(const std::string& text) {
    if (text == "none") return 0;
    if (text == "gzip") return 4;
    if (text.size() == 6 && text.compare(0, 5, "gzip:") == 0 && text[5] >= '1' && text[5] <= '9') return text[5] - '0';
    throw Error(exit_usage, "--compression: '" + text + "' is not one of none|gzip|gzip:1..9");
}

}  // namespace

std::string isa_choices(bool runnable_only) {
    std::string choices;
    for (const std::string& name : kernels::isa_names()) {
        if (runnable_only && !kernels::isa_available(*kernels::find_isa(name))) continue;
        choices += (choices.empty() ? "" : "|") + name;
    }
    return choices;
}

kernels::Isa parse_isa(const std::string& s) {
    const std::optional<kernels::Isa> isa = kernels::find_isa(s);
    if (!isa) throw Error(exit_usage, "--isa: '" + s + "' is not one of " + isa_choices(false));
    if (!kernels::isa_available(*isa)) {
        throw Error(exit_usage, "--isa: " + s + " is not available on this CPU, which runs " + isa_choices(true));
    }
    return *isa;
}

kernels::Precision parse_precision(const std::string& text, kernels::KernelKind kind) {
    const std::optional<kernels::Precision> precision = kernels::find_precision(text);
    if (!precision) throw Error(exit_usage, "--precision: '" + text + "' is not one of fp32|bf16");
    if (*precision == kernels::Precision::fp32) return *precision;
    if (kind == kernels::KernelKind::reference) {
        throw Error(exit_usage, "--precision bf16: the reference kernel computes in fp64; use --kernel blocked or --precision fp32");
    }
    if (!kernels::isa_available(kernels::Isa::best, *precision)) {
        throw Error(exit_usage, "--precision bf16: this CPU has neither AMX-BF16 nor AVX512-BF16; use --precision fp32");
    }
    return *precision;
}

kernels::Isa resolve_isa_for(kernels::Isa isa, kernels::Precision precision) {
    if (isa != kernels::Isa::best && kernels::isa_precision(isa) != precision) {
        std::string choices = "best";
        for (kernels::Isa other : kernels::built_isas()) {
            if (kernels::isa_precision(other) == precision && kernels::isa_available(other)) choices += std::string("|") + kernels::isa_name(other);
        }
        throw Error(exit_usage, std::string("--isa ") + kernels::isa_name(isa) + " computes in " +
                                    kernels::precision_name(kernels::isa_precision(isa)) + ", not " +
                                    kernels::precision_name(precision) + "; with --precision " +
                                    kernels::precision_name(precision) + " use --isa " + choices);
    }
    return kernels::resolve_isa(isa, precision);
}

int parse_tile_size(AutoCount count, const std::string& option) {
    if (count.value < 0 || count.value > std::numeric_limits<int>::max()) {
        throw Error(exit_usage, option + " " + std::to_string(count.value) + ": expected auto or a positive tile size up to " +
                                    std::to_string(std::numeric_limits<int>::max()));
    }
    return static_cast<int>(count.value);
}

std::size_t parse_bytes(const std::string& text, const std::string& option) {
    std::size_t used = 0;
    double value = 0;
    try {
        value = std::stod(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    std::string suffix = text.substr(used);
    for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    double scale = 0;
    if (suffix.empty() || suffix == "B") scale = 1;
    else if (suffix == "K" || suffix == "KB" || suffix == "KIB") scale = 1024.0;
    else if (suffix == "M" || suffix == "MB" || suffix == "MIB") scale = 1024.0 * 1024;
    else if (suffix == "G" || suffix == "GB" || suffix == "GIB") scale = 1024.0 * 1024 * 1024;
    else if (suffix == "T" || suffix == "TB" || suffix == "TIB") scale = 1024.0 * 1024 * 1024 * 1024;
    // Beyond 2^60 bytes (an exbibyte) no machine has it; the bound also keeps the size_t
    // conversion defined. Below one byte ("0.1") the size would truncate to 0.
    if (used == 0 || scale == 0 || !(value > 0) || !std::isfinite(value) || value * scale < 1 || value * scale > 1.15e18) {
        throw Error(exit_usage, option + ": '" + text + "' is not a positive size (expected e.g. 4G, 512M or 1000000)");
    }
    return static_cast<std::size_t>(value * scale);
}

RunOptions parse_run_options(const std::vector<std::string>& args) {
    const CommandSpec spec{
        "run",
        "Computes softmax(Q K^T / sqrt(d_k)) V for every sequence of an HDF5 dataset and writes /output, /lse,\n"
        "/lengths and (by default) /attention to OUTPUT, through OUTPUT.partial renamed at the end.",
        "  attnbatch run --input in.h5 --output out.h5\n"
        "  attnbatch run --input in.h5 --output out.h5 --heads 8 --causal --save-weights mean --weights-dtype f16\n"
        "  attnbatch run --input in.h5 --weights proj.h5 --heads 4 --output out.h5 --save-weights none\n"
        "  attnbatch run --input qkv.h5 --query /query --key /key --value /value --heads 8 --output out.h5\n"
        "  attnbatch run --input 'shards/*.npy' --heads 8 --output out.h5   # .npy shards [n_i, L, d] (+ lengths.npy) read in place\n"
        "  attnbatch run --input in.h5 --weights llama-layer.h5 --rope-theta 10000 --causal --output out.h5   # heads from the file\n"
        "  mpirun -np 1 attnbatch run --config job.ini --max-memory 8G --report run.json\n"};
    po::options_description options("run options");
    options.add_options()
        ("input", po::value<std::string>()->required(), "input HDF5 file, or .npy shards read in place: a glob ('shards/*.npy', quoted), a directory, or a .txt/.list file naming them")
        ("output", po::value<std::string>()->required(), "output HDF5 file (written as OUTPUT.partial, renamed when complete)")
        ("dataset", po::value<std::string>()->default_value("/embeddings"), "embeddings [N, L, d], float32 or float64")
        ("lengths", po::value<std::string>(), "valid tokens per sequence, integer [N] [/lengths if present; .npy shards: FILE.npy, lengths.npy beside them if present]; none: every sequence has L tokens")
        ("sequences", po::value<std::string>()->value_name("RANGE"), "compute only these sequences, one block n, A:B, :B or A: (zero-based, B exclusive) [all]; the output holds them and records first_sequence")
        ("query", po::value<std::string>(), "queries [N, L, H*d_k] or [N, H, L, d_k] (with --key and --value)")
        ("key", po::value<std::string>(), "keys, shaped as the queries")
        ("value", po::value<std::string>(), "values [N, L, H*d_v] or [N, H, L, d_v]")
        ("weights", po::value<std::string>(), "projection weights file: /w_q /w_k /w_v [/w_o] [/b_q /b_k /b_v /b_o]")
        ("heads", po::value<int>()->default_value(1), "attention heads H [the weights file's attribute heads, else 1]")
        ("kv-heads", po::value<int>(), "grouped-query attention: G K/V heads (G divides H; query head h reads K/V head h/(H/G)); w_k, w_v have G*d_k, G*d_v columns [the weights file's kv_heads, else what the shapes say, else H]")
        ("rope-theta", po::value<double>(), "rotary position embeddings on Q and K with this base (e.g. 10000), Hugging Face pair layout (i, i+d_k/2) [off]")
        ("causal", po::bool_switch(), "mask keys after the query")
        ("scale", po::value<double>()->default_value(0.0, "1/sqrt(d_k)"), "logit scale")
        ("save-weights", po::value<std::string>()->default_value("all")->implicit_value("all"), "attention maps (softmax probabilities) to store: none|all|mean (alone: all)")
        ("weights-dtype", po::value<std::string>()->default_value("f32"), "stored attention maps as f32|f16 (IEEE half)")
        ("weights-seqs", po::value<std::string>()->value_name("RANGE"), "store the attention maps of these sequences only: one block n, A:B, :B or A: [all computed]")
        ("compression", po::value<std::string>()->default_value("none"), "none|gzip|gzip:1-9 (with shuffle)")
        ("io", po::value<std::string>()->default_value("auto"), "auto|gather|parallel [auto: parallel with more than one rank]")
        ("schedule", po::value<std::string>()->default_value("static"), "static (cost-balanced contiguous shares)|dynamic (rank 0 hands out work)")
        ("threads", po::value<int>()->default_value(0, "OMP_NUM_THREADS, else all cores"), "OpenMP threads per rank")
        ("block-q", po::value<AutoCount>()->default_value(AutoCount{}, "auto"), "query tile rows")
        ("block-k", po::value<AutoCount>()->default_value(AutoCount{}, "auto"), "key tile columns")
        ("kernel", po::value<std::string>()->default_value("blocked"), "blocked|reference (fp64, slow)")
        ("isa", po::value<std::string>()->default_value("best"), isa_choices(false).c_str())
        ("precision", po::value<std::string>()->default_value("fp32"), "fp32|bf16 (Q, K, V and P rounded to bfloat16 for the matrix products, fp32 accumulation and softmax; AMX tiles where present unless ATTNBATCH_NO_AMX=1, else AVX512-BF16)")
        ("max-memory", po::value<std::string>(), "resident memory bound per rank, e.g. 8G [a quarter of the node's memory "
                                                  "(or its cgroup limit) divided by the ranks on the node]")
        ("unit-sequences", po::value<AutoCount>()->default_value(AutoCount{}, "auto"), "at most this many sequences per work unit (auto: as many as --max-memory allows in a step)")
        ("resume", po::bool_switch(), "continue OUTPUT.partial; with a complete OUTPUT of the same input and options do nothing (other ones: exit 2)")
        ("force", po::bool_switch(), "replace an existing OUTPUT (only once the new one is complete)")
        ("fsync", po::value<std::string>()->default_value("on")->value_name("on|off"),
         "on: OUTPUT appears only once its bytes are on the disk (fsync, rename, fsync of the directory), whole "
         "even after a crash of the node; off, for scratch file systems: published without waiting for the disk, whole "
         "unless the node itself crashes before its bytes reach the disk [on; with --resume, what OUTPUT.partial recorded]")
        ("dry-run", po::bool_switch(), "every check of the real run but the NaN/inf scan, the plan and sizes; write nothing; exit as the run would")
        ("simulate-ranks", po::value<int>()->default_value(0, "the ranks of this run"), "with --dry-run: plan for this many ranks without starting them")
        ("report", po::value<std::string>(), "write phase times and rates as JSON")
        ("progress", po::value<std::string>()->default_value("auto"), "auto (a live bar on a terminal, else a line every --progress-interval s)|always (the bar even without a terminal)|never")
        ("progress-interval", po::value<double>()->default_value(30.0), "seconds between progress lines in batch logs")
        ("verbose", po::bool_switch(), "every rank prints its own progress and summary, not only rank 0");
    po::variables_map vm;
    RunOptions o;
    if (!parse_command_line(spec, options, args, vm)) {
        o.stop = true;
        return o;
    }
    distributed::JobSettings& j = o.job;
    j.input.input_path = vm["input"].as<std::string>();
    j.output = vm["output"].as<std::string>();
    const bool qkv = vm.count("query") || vm.count("key") || vm.count("value");
    if (!qkv || !vm["dataset"].defaulted()) j.input.dataset = vm["dataset"].as<std::string>();
    if (vm.count("lengths")) {
        j.input.lengths = vm["lengths"].as<std::string>();
        if (j.input.lengths.empty()) throw Error(exit_usage, "--lengths: expected a dataset name, or none");
    }
    if (vm.count("sequences")) j.sequences = parse_sequence_block(vm["sequences"].as<std::string>(), "--sequences");
    if (vm.count("query")) j.input.query = vm["query"].as<std::string>();
    if (vm.count("key")) j.input.key = vm["key"].as<std::string>();
    if (vm.count("value")) j.input.value = vm["value"].as<std::string>();
    if (vm.count("weights")) j.input.weights_path = vm["weights"].as<std::string>();
    const int heads = vm["heads"].as<int>();
    if (heads < 1) throw Error(exit_usage, "--heads: " + std::to_string(heads) + " is not a positive number of heads");
    j.input.heads = vm["heads"].defaulted() ? 0 : heads;
    if (vm.count("kv-heads")) {
        j.input.kv_heads = vm["kv-heads"].as<int>();
        if (j.input.kv_heads < 1) throw Error(exit_usage, "--kv-heads: " + std::to_string(j.input.kv_heads) + " is not a positive number of K/V heads");
    }
    if (vm.count("rope-theta")) {
        j.attention.rope_theta = vm["rope-theta"].as<double>();
        if (!(j.attention.rope_theta >= 0) || !std::isfinite(j.attention.rope_theta)) {
            throw Error(exit_usage, "--rope-theta: expected a positive base such as 10000 (0: off)");
        }
    }
    j.attention.causal = vm["causal"].as<bool>();
    j.attention.scale = vm["scale"].as<double>();
    if (!(j.attention.scale >= 0) || !std::isfinite(j.attention.scale)) throw Error(exit_usage, "--scale: expected a positive number (0 for 1/sqrt(d_k))");
    const std::string save = vm["save-weights"].as<std::string>();
    if (save == "none") j.save_weights = io::SaveWeights::none;
    else if (save == "all") j.save_weights = io::SaveWeights::all;
    else if (save == "mean") j.save_weights = io::SaveWeights::mean;
    else throw Error(exit_usage, "--save-weights: '" + save + "' is not one of none|all|mean");
    const std::string dtype = vm["weights-dtype"].as<std::string>();
    if (dtype == "f32") j.weights_dtype = io::WeightsDtype::f32;
    else if (dtype == "f16") j.weights_dtype = io::WeightsDtype::f16;
    else throw Error(exit_usage, "--weights-dtype: '" + dtype + "' is not one of f32|f16");
    if (vm.count("weights-seqs")) {
        if (j.save_weights == io::SaveWeights::none) {
            throw Error(exit_usage, "--weights-seqs " + vm["weights-seqs"].as<std::string>() +
                                        " chooses which weights to store, but --save-weights none stores none; hint: "
                                        "drop one of them, or --save-weights all|mean");
        }
        j.weights_sequences = parse_sequence_block(vm["weights-seqs"].as<std::string>(), "--weights-seqs");
    }
    j.gzip_level = parse_compression(vm["compression"].as<std::string>());
    const std::string io_mode = vm["io"].as<std::string>();
    if (io_mode == "auto") j.io_mode = distributed::IoMode::automatic;
    else if (io_mode == "gather") j.io_mode = distributed::IoMode::gather;
    else if (io_mode == "parallel") j.io_mode = distributed::IoMode::parallel;
    else throw Error(exit_usage, "--io: '" + io_mode + "' is not one of auto|gather|parallel");
    const std::string schedule = vm["schedule"].as<std::string>();
    if (schedule == "static") j.schedule = distributed::ScheduleKind::cost_static;
    else if (schedule == "dynamic") j.schedule = distributed::ScheduleKind::dynamic;
    else throw Error(exit_usage, "--schedule: '" + schedule + "' is not one of static|dynamic");
    j.kernel.threads = vm["threads"].as<int>();
    if (j.kernel.threads < 0 || j.kernel.threads > kernels::max_threads) {
        throw Error(exit_usage, "--threads " + std::to_string(j.kernel.threads) + ": expected 0 (automatic) or a count up to " +
                                    std::to_string(kernels::max_threads));
    }
    j.kernel.block_q = parse_tile_size(vm["block-q"].as<AutoCount>(), "--block-q");
    j.kernel.block_k = parse_tile_size(vm["block-k"].as<AutoCount>(), "--block-k");
    const std::string kernel = vm["kernel"].as<std::string>();
    if (kernel != "blocked" && kernel != "reference") throw Error(exit_usage, "--kernel: '" + kernel + "' is not one of blocked|reference");
    j.kernel.kind = kernel == "reference" ? kernels::KernelKind::reference : kernels::KernelKind::blocked;
    j.kernel.isa = parse_isa(vm["isa"].as<std::string>());
    j.attention.precision = parse_precision(vm["precision"].as<std::string>(), j.kernel.kind);
    resolve_isa_for(j.kernel.isa, j.attention.precision);  // refuses an --isa of the other precision
    j.kernel.amx_permitted = j.attention.precision == kernels::Precision::bf16 && amx_permitted();
    // 0: the job divides the node's memory by the ranks that share the node.
    j.max_memory = vm.count("max-memory") ? parse_bytes(vm["max-memory"].as<std::string>(), "--max-memory") : 0;
    j.unit_sequences = vm["unit-sequences"].as<AutoCount>().value;
    if (j.unit_sequences < 0) {
        throw Error(exit_usage, "--unit-sequences " + std::to_string(j.unit_sequences) + ": expected auto or a positive count");
    }
    j.resume = vm["resume"].as<bool>();
    j.force = vm["force"].as<bool>();
    const std::string fsync = vm["fsync"].as<std::string>();
    if (fsync != "on" && fsync != "off") throw Error(exit_usage, "--fsync: '" + fsync + "' is not one of on|off");
    if (!vm["fsync"].defaulted()) j.fsync = fsync == "on";
    j.dry_run = vm["dry-run"].as<bool>();
    j.simulate_ranks = vm["simulate-ranks"].as<int>();
    if (j.simulate_ranks < 0 || j.simulate_ranks > (1 << 24)) {
        throw Error(exit_usage, "--simulate-ranks: expected 1 to 16777216 ranks, or 0 for the ranks of this run");
    }
    if (j.simulate_ranks > 0 && !j.dry_run) {
        throw Error(exit_usage, "--simulate-ranks " + std::to_string(j.simulate_ranks) + " needs --dry-run (it plans without running)");
    }
    if (vm.count("report")) o.report = vm["report"].as<std::string>();
    o.progress = vm["progress"].as<std::string>();
    o.progress_interval = vm["progress-interval"].as<double>();
    if (!(o.progress_interval > 0)) throw Error(exit_usage, "--progress-interval: expected seconds > 0");
    o.verbose = vm["verbose"].as<bool>();
    if (o.progress != "auto" && o.progress != "always" && o.progress != "never") {
        throw Error(exit_usage, "--progress: '" + o.progress + "' is not one of auto|always|never");
    }
    j.recorded_config = describe_options(vm);
    j.version = ATTNBATCH_VERSION;
    return o;
}

}  // namespace attnbatch::cli
