// `attnbatch bench`: the kernel alone on synthetic in-memory data, against this core's
// measured FMA peak; with --projections, also the step compute of `run` (projections, attention,
// attention maps) on the same shape, and its rate against the kernel's.
#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <vector>

#include "attnbatch/distributed/step_computer.hpp"
#include "attnbatch/distributed/step_memory.hpp"
#include "attnbatch/kernels/attention.hpp"
#include "attnbatch/kernels/fma_peak.hpp"
#include "attnbatch/kernels/threads.hpp"
#include "amx_permission.hpp"
#include "json_writer.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "run_options.hpp"


namespace attnbatch::cli {

namespace k = attnbatch::kernels;

namespace {

struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<void, FreeDeleter>;

// As a run's step buffers: huge pages for the large ones, as the kernel meets them in a run.
Buffer allocate(std::size_t bytes) { return Buffer(distributed::allocate_step_memory(bytes)); }

k::WeightsMode parse_weights_mode(const std::string& s) {
    if (s == "none") return k::WeightsMode::none;
    if (s == "all") return k::WeightsMode::all;
    if (s == "mean") return k::WeightsMode::mean_over_heads;
    throw Error(exit_usage, "--save-weights: '" + s + "' is not one of none|all|mean");
}

void require_positive(const po::variables_map& vm, const char* name, long long limit) {
    const int value = vm[name].as<int>();
    if (value < 1 || value > limit) {
        throw Error(exit_usage, std::string("--") + name + ": " + std::to_string(value) +
                                        " is out of range, expected 1.." + std::to_string(limit));
    }
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One step of `run` over B whole sequences of L tokens of width d (embeddings, standard
// normal), projected by synthetic weights as generate --weights-out writes them (w_q, w_k, w_v
// [d, H*d_k or H*d_v], w_o [H*d_v, d], biases; N(0, 1/fan_in)), through the same StepComputer.
class ProjectedStep {
public:
    ProjectedStep(int batch, int heads, int len, int dim_k, int dim_v, int d, bool causal, k::WeightsMode maps,
                  bool maps_f16, const k::KernelOptions& kernel, unsigned seed) {
        spec_.path = "bench";
        spec_.mode = io::InputMode::embeddings;
        spec_.n = batch;
        spec_.len = len;
        spec_.d = d;
        spec_.heads = heads;
        spec_.d_k = dim_k;
        spec_.d_v = dim_v;
        io::WeightsSpec w;
        w.path = "bench";
        w.d_in = d;
        w.qk_width = static_cast<std::int64_t>(heads) * dim_k;
        w.v_width = static_cast<std::int64_t>(heads) * dim_v;
        w.has_w_o = true;
        w.d_out = d;
        w.has_b_q = w.has_b_k = w.has_b_v = w.has_b_o = true;
        spec_.weights = w;
        layout_ = io::output_layout_for(spec_);
        layout_.save_weights = maps == k::WeightsMode::all    ? io::SaveWeights::all
                               : maps == k::WeightsMode::none ? io::SaveWeights::none
                                                              : io::SaveWeights::mean;
        layout_.weights_dtype = maps_f16 ? io::WeightsDtype::f16 : io::WeightsDtype::f32;
        settings_.spec.causal = causal;
        settings_.spec.precision = kernel.precision;
        settings_.spec = settings_.spec.resolved(dim_k);
        settings_.kernel = kernel;

        std::mt19937 rng(seed + 1);
        const auto fill = [&rng](std::vector<float>& v, std::size_t n, double fan_in) {
            std::normal_distribution<float> normal(0.0f, static_cast<float>(1.0 / std::sqrt(fan_in)));
            v.resize(n);
            for (float& x : v) x = normal(rng);
        };
        io::ProjectionWeights& pw = weights_.emplace();
        const auto qk = static_cast<std::size_t>(w.qk_width), vw = static_cast<std::size_t>(w.v_width), dd = static_cast<std::size_t>(d);
        fill(pw.w_q, dd * qk, d);
        fill(pw.w_k, dd * qk, d);
        fill(pw.w_v, dd * vw, d);
        fill(pw.w_o, vw * dd, static_cast<double>(vw));
        fill(pw.b_q, qk, d);
        fill(pw.b_k, qk, d);
        fill(pw.b_v, vw, d);
        fill(pw.b_o, dd, static_cast<double>(vw));
        block_.first = 0;
        block_.count = batch;
        fill(block_.x, static_cast<std::size_t>(batch) * static_cast<std::size_t>(len) * dd, 1.0);
        block_.lengths.assign(static_cast<std::size_t>(batch), len);
        computer_.emplace(spec_, weights_, settings_, layout_);
    }

    // One step; the FLOPs as run's report counts them (attention and projections).
    double run() {
        distributed::ComputeTally tally;
        io::OutputBlock out;
        computer_->compute(block_, outputs_, out, tally);
        return tally.attention_flops + tally.projection_flops;
    }

private:
    io::InputSpec spec_;
    io::OutputLayout layout_;
    distributed::AttentionSettings settings_;
    std::optional<io::ProjectionWeights> weights_;
    io::InputBlock block_;
    distributed::StepOutputs outputs_;
    std::optional<distributed::StepComputer> computer_;
};

}  // namespace

int bench_command(const std::vector<std::string>& args) {
    const CommandSpec spec{
        "bench",
        "Times the attention kernel alone on synthetic data and compares it with the FMA peak of its threads' cores.\n"
        "Attention FLOPs per pass: 2*B*H*L^2*(d_k + d_v) (= 4*B*H*L^2*d for d_v = d_k), half with --causal.\n"
        "With --projections it also times one step of `run` on the same shape: embeddings of width d projected\n"
        "to Q, K, V, the attention (keeping the maps --save-weights asks for) and the output projection, in turns\n"
        "with the kernel alone (no maps); its rate counts attention and projection FLOPs as run's report does.",
        "  attnbatch bench --batch 8 --heads 8 --seq-len 512 --head-dim 64 --threads 1\n"
        "  attnbatch bench --seq-len 2048 --causal --threads 2 --json\n"
        "  attnbatch bench --precision bf16 --threads 1 --check\n"
        "  attnbatch bench --save-weights mean --weights-dtype f16 --kernel reference --repeats 1\n"
        "  attnbatch bench --batch 64 --heads 1 --seq-len 256 --head-dim 64 --projections --save-weights all\n"};
    po::options_description options("bench options");
    options.add_options()
        ("batch", po::value<int>()->default_value(8), "sequences B")
        ("heads", po::value<int>()->default_value(8), "heads H")
        ("seq-len", po::value<int>()->default_value(512), "tokens per sequence L (queries and keys)")
        ("head-dim", po::value<int>()->default_value(64), "d_k, features per head of queries and keys (as generate --head-dim)")
        ("value-dim", po::value<int>()->default_value(0, "d_k"), "d_v, features per head of values")
        ("causal", po::bool_switch(), "mask keys after the query (the FLOP count is halved)")
        ("threads", po::value<int>()->default_value(0, "OMP_NUM_THREADS, else all cores"), "OpenMP threads")
        ("save-weights", po::value<std::string>()->default_value("none")->implicit_value("all"),
         "also produce attention weights: none|all|mean (alone: all)")
        ("weights-dtype", po::value<std::string>()->default_value("f32"), "weights as f32|f16")
        ("projections", po::bool_switch(),
         "also time run's step compute with projection weights (w_q, w_k, w_v, w_o and biases, synthetic) on the same "
         "shape, in turns with the kernel alone, and report its rate against the kernel's")
        ("model-dim", po::value<int>()->default_value(0, "H*d_k"), "with --projections: embedding width d, the rows of w_q, w_k, w_v")
        ("kernel", po::value<std::string>()->default_value("blocked"), "blocked|reference")
        ("isa", po::value<std::string>()->default_value("best"), ("blocked kernel ISA: " + isa_choices(false)).c_str())
        ("precision", po::value<std::string>()->default_value("fp32"),
         "fp32|bf16: bf16 rounds Q, K, V and P to bfloat16 for the matrix products (AMX tiles where present, else "
         "AVX512-BF16; ATTNBATCH_NO_AMX=1 keeps them off the tiles), fp32 accumulation and softmax")
        ("block-q", po::value<AutoCount>()->default_value(AutoCount{}, "auto"), "query tile rows")
        ("block-k", po::value<AutoCount>()->default_value(AutoCount{}, "auto"), "key tile columns")
        ("repeats", po::value<int>()->default_value(7), "timed runs; the median is reported")
        ("seed", po::value<unsigned>()->default_value(1), "random seed of the synthetic Q, K, V")
        ("check", po::value<std::string>()->default_value("off")->implicit_value("4")->value_name("N"),
         "also compare the output of the first N (sequence, head) pairs with the fp64 reference: max abs error and "
         "NMSE (alone: 4)")
        ("json", po::bool_switch(), "print one JSON object instead of text");
    // The spellings of bench before --dim meant the model width d everywhere (generate, run):
    // here they meant d_k and d_v, and still do, unlisted.
    po::options_description old_spellings;
    old_spellings.add_options()
        ("dim", po::value<int>(), "old spelling of --head-dim")
        ("dim-v", po::value<int>(), "old spelling of --value-dim");
    po::variables_map vm;
    if (!parse_command_line(spec, options, args, vm, &old_spellings)) return exit_ok;
    for (const auto& [old_name, name] : {std::pair{"dim", "head-dim"}, std::pair{"dim-v", "value-dim"}}) {
        if (!vm.count(old_name)) continue;
        if (!vm[name].defaulted()) {
            throw Error(exit_usage, std::string("--") + old_name + " and --" + name + " are one option (d_k or d_v per head); give --" + name + " only");
        }
        vm.at(name).value() = vm[old_name].value();
    }

    require_positive(vm, "batch", 1 << 20);
    require_positive(vm, "heads", 4096);
    require_positive(vm, "seq-len", 1 << 20);
    require_positive(vm, "head-dim", 1 << 16);
    require_positive(vm, "repeats", 10000);
    const int batch = vm["batch"].as<int>(), heads = vm["heads"].as<int>(), len = vm["seq-len"].as<int>();
    const int dim_k = vm["head-dim"].as<int>();
    if (vm["value-dim"].as<int>() < 0) throw Error(exit_usage, "--value-dim: expected a positive d_v (0: d_k)");
    const int dim_v = vm["value-dim"].as<int>() > 0 ? vm["value-dim"].as<int>() : dim_k;
    const bool causal = vm["causal"].as<bool>();
    const int repeats = vm["repeats"].as<int>();
    const std::string weights_text = vm["save-weights"].as<std::string>();
    const k::WeightsMode weights_mode = parse_weights_mode(weights_text);
    const std::string dtype_text = vm["weights-dtype"].as<std::string>();
    if (dtype_text != "f32" && dtype_text != "f16") {
        throw Error(exit_usage, "--weights-dtype: '" + dtype_text + "' is not one of f32|f16");
    }
    const std::string kernel_text = vm["kernel"].as<std::string>();
    if (kernel_text != "blocked" && kernel_text != "reference") {
        throw Error(exit_usage, "--kernel: '" + kernel_text + "' is not one of blocked|reference");
    }
    if (vm["threads"].as<int>() < 0 || vm["threads"].as<int>() > k::max_threads) {
        throw Error(exit_usage, "--threads " + std::to_string(vm["threads"].as<int>()) +
                                    ": expected 0 (automatic) or a count up to " + std::to_string(k::max_threads));
    }
    const int block_q = parse_tile_size(vm["block-q"].as<AutoCount>(), "--block-q");
    const int block_k = parse_tile_size(vm["block-k"].as<AutoCount>(), "--block-k");
    // Checked before the timing, which a bad value would otherwise have run first.
    const std::string check_text = vm["check"].as<std::string>();
    const std::optional<std::int64_t> check_pairs = check_text == "off" ? std::int64_t{0} : whole_number(check_text);
    if (!check_pairs || *check_pairs < 0 || *check_pairs > std::numeric_limits<int>::max()) {
        throw Error(exit_usage, "--check '" + check_text + "': expected off or a number of (sequence, head) pairs");
    }

    const bool projections = vm["projections"].as<bool>();
    if (!projections && !vm["model-dim"].defaulted()) throw Error(exit_usage, "--model-dim needs --projections");
    if (vm["model-dim"].as<int>() < 0 || vm["model-dim"].as<int>() > (1 << 16)) {
        throw Error(exit_usage, "--model-dim: " + std::to_string(vm["model-dim"].as<int>()) + " is out of range, expected 1.." +
                                    std::to_string(1 << 16) + " (0: H*d_k)");
    }
    const int model_dim = vm["model-dim"].as<int>() > 0 ? vm["model-dim"].as<int>() : heads * dim_k;

    k::KernelOptions kopt;
    kopt.kind = kernel_text == "reference" ? k::KernelKind::reference : k::KernelKind::blocked;
    kopt.precision = parse_precision(vm["precision"].as<std::string>(), kopt.kind);
    kopt.isa = resolve_isa_for(parse_isa(vm["isa"].as<std::string>()), kopt.precision);
    kopt.amx_permitted = kopt.precision == k::Precision::bf16 && amx_permitted();
    kopt.threads = k::resolved_threads(vm["threads"].as<int>());
    kopt.block_q = block_q;
    kopt.block_k = block_k;

    // (B, H, L, d) contiguous inputs, standard normal.
    const std::size_t rows = static_cast<std::size_t>(batch) * heads * len;
    Buffer q = allocate(rows * dim_k * sizeof(float)), kk = allocate(rows * dim_k * sizeof(float));
    Buffer v = allocate(rows * dim_v * sizeof(float)), out = allocate(rows * dim_v * sizeof(float));
    Buffer lse = allocate(rows * sizeof(float));
    {
        std::mt19937 rng(vm["seed"].as<unsigned>());
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (auto* buffer : {static_cast<float*>(q.get()), static_cast<float*>(kk.get())})
            for (std::size_t i = 0; i < rows * dim_k; ++i) buffer[i] = normal(rng);
        float* vb = static_cast<float*>(v.get());
        for (std::size_t i = 0; i < rows * dim_v; ++i) vb[i] = normal(rng);
    }
    k::AttentionParams p;
    auto strides = [&](int d) { return k::TensorStrides{static_cast<std::ptrdiff_t>(heads) * len * d, static_cast<std::ptrdiff_t>(len) * d, d}; };
    p.q = static_cast<const float*>(q.get());
    p.k = static_cast<const float*>(kk.get());
    p.v = static_cast<const float*>(v.get());
    p.out = static_cast<float*>(out.get());
    p.q_strides = p.k_strides = strides(dim_k);
    p.v_strides = p.out_strides = strides(dim_v);
    p.batch = batch;
    p.heads = heads;
    p.len_q = p.len_k = len;
    p.dim_k = dim_k;
    p.dim_v = dim_v;
    p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim_k)));
    p.causal = causal;
    p.lse = static_cast<float*>(lse.get());
    Buffer weights;
    // With --projections the kernel alone is the plain yardstick (no maps); the maps are the step's.
    if (weights_mode != k::WeightsMode::none && !projections) {
        const std::size_t maps = static_cast<std::size_t>(batch) * (weights_mode == k::WeightsMode::all ? heads : 1);
        weights = allocate(maps * len * len * (dtype_text == "f16" ? 2 : 4));
        p.weights = weights.get();
        p.weights_mode = weights_mode;
        p.weights_type = dtype_text == "f16" ? k::WeightsType::f16 : k::WeightsType::f32;
    }
    const std::size_t workspace_bytes = k::attention_workspace_bytes(p, kopt);
    std::vector<unsigned char> workspace(workspace_bytes);  // as a run's (step_computer.cpp)
    std::optional<ProjectedStep> step;
    if (projections) {
        step.emplace(batch, heads, len, dim_k, dim_v, model_dim, causal, weights_mode, dtype_text == "f16", kopt,
                     vm["seed"].as<unsigned>());
    }

    // This machine is shared: a peak measured once and a kernel timed later can see different
    // neighbours. So every timed run is paired with a short peak burst just before it, on all of
    // the kernel's threads at once (two vCPUs here have run 10-15% apart), and the fraction of
    // peak is the median of those paired ratios. One untimed run first faults in every page.
    k::attention_forward(p, kopt, workspace.data(), workspace_bytes);
    const double flops = 2.0 * batch * heads * static_cast<double>(len) * len * (dim_k + dim_v) * (causal ? 0.5 : 1.0);
    // The step's first run writes its outputs into fresh memory, as each slot's first step of a run does.
    const auto first_t0 = std::chrono::steady_clock::now();
    const double step_flops = step ? step->run() : 0.0;
    const double step_first_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - first_t0).count();
    // The kernel's threads' CPU time (each read by its own thread: team_cpu_seconds) beside the
    // wall time: their ratio says how much of the run its threads actually had a core (other
    // processes take the rest on a busy host), which is what makes wall-time figures on a shared
    // machine spread (docs/performance.md "Measuring on a shared machine").
    // Both divided by their on-CPU shares give rates per second on a core, which time slicing by
    // other processes leaves alone: fraction_on_cpu is steady where fraction_of_peak is not.
    std::vector<double> seconds, peaks, fractions, on_cpu, fractions_on_cpu;
    std::vector<double> step_seconds, step_ratios, step_fractions;  // --projections
    int peak_bits = 0;
    for (int r = 0; r < repeats; ++r) {
        const double burst_cpu0 = k::team_cpu_seconds(kopt.threads);
        const auto burst_t0 = std::chrono::steady_clock::now();
        const k::FmaPeak peak = k::measure_fma_peak_together(kopt.threads, 0.05);
        const double burst_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - burst_t0).count();
        const double burst_on_cpu =
            burst_wall > 0 ? (k::team_cpu_seconds(kopt.threads) - burst_cpu0) / (burst_wall * kopt.threads) : 1.0;
        peak_bits = peak.vector_bits;
        const double cpu0 = k::team_cpu_seconds(kopt.threads);
        const auto t0 = std::chrono::steady_clock::now();
        k::attention_forward(p, kopt, workspace.data(), workspace_bytes);
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        on_cpu.push_back(elapsed > 0 ? (k::team_cpu_seconds(kopt.threads) - cpu0) / (elapsed * kopt.threads) : 1.0);
        const double peak_on_cpu = peak.gflops_per_core / std::max(burst_on_cpu, 1e-3);
        fractions_on_cpu.push_back(peak_on_cpu > 0 ? flops / elapsed * 1e-9 / std::max(on_cpu.back(), 1e-3) /
                                                         (peak_on_cpu * kopt.threads)
                                                   : 0.0);
        seconds.push_back(elapsed);
        peaks.push_back(peak.gflops_per_core);
        fractions.push_back(peak.gflops_per_core > 0 ? flops / elapsed * 1e-9 / (peak.gflops_per_core * kopt.threads) : 0.0);
        if (step) {
            const auto s0 = std::chrono::steady_clock::now();
            step->run();
            const double step_elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
            step_seconds.push_back(step_elapsed);
            step_ratios.push_back(step_flops / step_elapsed / (flops / elapsed));
            step_fractions.push_back(peak.gflops_per_core > 0
                                         ? step_flops / step_elapsed * 1e-9 / (peak.gflops_per_core * kopt.threads)
                                         : 0.0);
        }
    }
    // Accuracy against the fp64 reference on the first (sequence, head) pairs of the last run.
    const int checked = std::min(static_cast<int>(*check_pairs), batch * heads);
    // With bf16 arithmetic also the floor of its error: the same NMSE of attention in double on
    // Q, K, V and P rounded to bf16 (kernels::bf16_operands_attention_f64).
    const bool bf16_floor = kopt.kind == k::KernelKind::blocked && kopt.precision == k::Precision::bf16;
    double max_error = 0, sum_sq_error = 0, sum_sq_ref = 0, sum_sq_floor_error = 0;
    if (checked > 0) {
        k::AttentionParams first = p;
        first.batch = 1;
        first.heads = 1;
        first.lse = nullptr;
        first.weights = nullptr;
        first.weights_mode = k::WeightsMode::none;
        std::vector<double> ref(static_cast<std::size_t>(len) * dim_v), floor_out(bf16_floor ? ref.size() : 0);
        for (int pair = 0; pair < checked; ++pair) {
            const std::ptrdiff_t head_q = static_cast<std::ptrdiff_t>(pair) * len * dim_k;
            const std::ptrdiff_t head_v = static_cast<std::ptrdiff_t>(pair) * len * dim_v;
            first.q = p.q + head_q;
            first.k = p.k + head_q;
            first.v = p.v + head_v;
            k::ReferenceOutputs ro;
            ro.out = ref.data();
            k::reference_attention_f64(first, ro);
            if (bf16_floor) {
                k::ReferenceOutputs fo;
                fo.out = floor_out.data();
                k::bf16_operands_attention_f64(first, fo);
                for (std::size_t i = 0; i < ref.size(); ++i) sum_sq_floor_error += (floor_out[i] - ref[i]) * (floor_out[i] - ref[i]);
            }
            const float* got = p.out + head_v;
            for (std::size_t i = 0; i < ref.size(); ++i) {
                const double e = std::fabs(static_cast<double>(got[i]) - ref[i]);
                max_error = std::max(max_error, e);
                sum_sq_error += e * e;
                sum_sq_ref += ref[i] * ref[i];
            }
        }
    }
    const double nmse = sum_sq_ref > 0 ? sum_sq_error / sum_sq_ref : 0.0;
    const double nmse_floor = sum_sq_ref > 0 ? sum_sq_floor_error / sum_sq_ref : 0.0;

    const double med = median(seconds);
    const double best = *std::min_element(seconds.begin(), seconds.end());
    const double worst = *std::max_element(seconds.begin(), seconds.end());
    const double gflops = flops / med * 1e-9;
    const double peak_gflops = median(peaks);
    const double fraction = median(fractions);
    const char* isa = kopt.kind == k::KernelKind::reference ? "fp64-reference" : k::isa_name(kopt.isa);
    const char* precision = kopt.kind == k::KernelKind::reference ? "fp64" : k::precision_name(kopt.precision);
    const std::string unit = k::matrix_unit(kopt);
    // Rows per register tile, where the backend chooses them by CPU (isa.hpp): the same bits
    // either way, but not the same speed.
    const int row_block = k::row_block(kopt);
    // With --projections, gflops and fraction_of_peak are the step's; the kernel's are "plain".
    const double step_gflops = step ? step_flops / median(step_seconds) * 1e-9 : 0.0;
    const double step_ratio = step ? median(step_ratios) : 0.0;

    if (vm["json"].as<bool>()) {
        std::ostringstream j;
        j << std::setprecision(6) << "{\"gflops\": " << (step ? step_gflops : gflops) << ", \"peak_gflops_per_core\": " << peak_gflops
          << ", \"threads\": " << kopt.threads << ", \"fraction_of_peak\": " << (step ? median(step_fractions) : fraction);
        if (step) {
            j << ", \"projections\": true, \"model_dim\": " << model_dim << ", \"step_gflop_per_pass\": " << step_flops * 1e-9
              << ", \"step_median_seconds\": " << median(step_seconds) << ", \"plain_gflops\": " << gflops
              << ", \"plain_fraction_of_peak\": " << fraction << ", \"ratio_to_plain\": " << step_ratio
              << ", \"first_step_gflops\": " << step_flops / step_first_seconds * 1e-9;
        }
        j
          << ", \"median_seconds\": " << med << ", \"min_seconds\": " << best << ", \"max_seconds\": " << worst
          << ", \"repeats\": " << repeats << ", \"batch\": " << batch << ", \"heads\": " << heads
          << ", \"seq_len\": " << len << ", \"dim_k\": " << dim_k << ", \"dim_v\": " << dim_v
          << ", \"causal\": " << (causal ? "true" : "false") << ", \"save_weights\": \"" << weights_text
          << "\", \"weights_dtype\": \"" << dtype_text << "\", \"kernel\": \"" << kernel_text << "\", \"isa\": \"" << isa
          << "\", \"precision\": \"" << precision << "\", \"matrix_unit\": \"" << unit << "\", \"peak_vector_bits\": " << peak_bits << ", \"gflop_per_pass\": " << flops * 1e-9;
        std::vector<double> rates_on_cpu;  // GFLOP/s were every thread on a core throughout
        for (std::size_t r = 0; r < seconds.size(); ++r) rates_on_cpu.push_back(flops / seconds[r] * 1e-9 / std::max(on_cpu[r], 1e-3));
        j << ", \"on_cpu\": " << median(on_cpu) << ", \"gflops_on_cpu\": " << median(rates_on_cpu)
          << ", \"fraction_on_cpu\": " << median(fractions_on_cpu);
        if (checked > 0) j << ", \"checked_heads\": " << checked << ", \"max_abs_error\": " << max_error << ", \"nmse\": " << nmse;
        if (checked > 0 && bf16_floor) j << ", \"nmse_floor\": " << nmse_floor;
        if (kopt.precision == k::Precision::bf16) j << ", \"amx_tiles_off\": " << json_quote(amx_refusal());
        if (row_block > 0) j << ", \"row_block\": " << row_block;
        j << "}\n";
        std::cout << j.str();
    } else {
        std::cout << std::fixed << std::setprecision(2)
                  << "attnbatch bench: B=" << batch << " H=" << heads << " L=" << len << " d_k=" << dim_k << " d_v=" << dim_v
                  << (causal ? " causal" : "") << " weights=" << weights_text
                  << (weights_mode != k::WeightsMode::none ? "/" + dtype_text : std::string())
                  << " kernel=" << kernel_text << " isa=" << isa << " precision=" << precision
                  << (unit != isa ? " on " + unit : std::string())
                  << (kopt.precision == k::Precision::bf16 ? amx_refusal_note() : std::string())
                  << " threads=" << kopt.threads
                  << (row_block > 0 ? " rows=" + std::to_string(row_block) : std::string()) << '\n'
                  << "  time       " << med * 1e3 << " ms median of " << repeats << " (min " << best * 1e3 << ", max "
                  << worst * 1e3 << ")\n"
                  << "  attention  " << gflops << " GFLOP/s (" << flops * 1e-9 << " GFLOP per pass"
                  << (step ? "; the kernel alone, no maps" : "") << ")\n"
                  << "  peak       " << peak_gflops << " GFLOP/s per core (" << peak_bits
                  << "-bit FMA, median of bursts between the runs, on every thread at once)\n"
                  << "  fraction   " << std::setprecision(3) << fraction << " of peak x " << kopt.threads
                  << " thread(s) (median of per-run ratios)\n"
                  << "  on CPU     " << median(on_cpu) << " of the time x threads (below 1: other processes had the cores);\n"
                  << "             per second on a core, " << median(fractions_on_cpu) << " of peak\n";
        if (step) {
            std::cout << std::setprecision(2) << "  with projections (d=" << model_dim << ", w_q w_k w_v w_o, maps " << weights_text
                      << "): " << step_gflops << " GFLOP/s (" << step_flops * 1e-9 << " GFLOP per step, attention + projections; "
                      << median(step_seconds) * 1e3 << " ms median)\n"
                      << "             " << std::setprecision(3) << step_ratio
                      << " of the kernel's rate alone (median of per-run ratios, runs in turns)\n"
                      << "             first step " << std::setprecision(2) << step_flops / step_first_seconds * 1e-9
                      << " GFLOP/s (untimed above: its outputs and scratch in fresh memory)\n";
        }
        if (checked > 0) {
            std::cout << std::scientific << std::setprecision(2) << "  accuracy   max abs error " << max_error << ", NMSE "
                      << nmse << " against the fp64 reference (" << checked << " sequence-head pairs)\n";
            if (bf16_floor) {
                std::cout << "             floor NMSE " << nmse_floor << " (Q, K, V and P rounded to bf16, all else in double): "
                          << std::fixed << std::setprecision(3) << (nmse_floor > 0 ? nmse / nmse_floor : 0.0) << "x\n";
            }
        }
    }
    return exit_ok;
}

}  // namespace attnbatch::cli
