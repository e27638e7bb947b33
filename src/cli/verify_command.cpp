// `attnbatch verify`: recomputes sampled sequences of a finished run with the fp64 reference
// (projections in double too) and compares /output, /lse and /attention with it.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>

#include "attnbatch/error.hpp"
#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/io/output/output_reader.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "attnbatch/kernels/attention.hpp"
#include "attnbatch/kernels/half.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "recorded_run.hpp"
#include "recorded_run_checks.hpp"

namespace attnbatch::cli {

namespace {

constexpr double infinite = std::numeric_limits<double>::infinity();

// std::max(worst, NaN) keeps `worst`, so a NaN error would pass: it counts as infinite.
void raise_to(double& worst, double error) {
    if (std::isnan(error)) error = infinite;
    if (error > worst) worst = error;
}

struct ErrorStat {
    double max_abs = 0, max_ref = 0;
    std::size_t non_finite = 0;  // values NaN or infinite where the reference is finite (or NaN)
    void add(double got, double ref) {
        if (std::isinf(ref) && got == ref) return;  // -inf lse of a row that sees no key
        const bool finite = std::isfinite(got) && std::isfinite(ref);
        if (!finite) ++non_finite;
        raise_to(max_abs, finite ? std::fabs(got - ref) : infinite);
        if (std::isfinite(ref)) raise_to(max_ref, std::fabs(ref));
    }
    double rel() const { return max_ref > 0 ? max_abs / max_ref : max_abs; }
    std::string note() const {
        return non_finite == 0 ? std::string()
                               : "  (" + std::to_string(non_finite) + " NaN or infinite where a finite value is expected)";
    }
};

// A count as the whole text, digits only: stol would read '3abc' as 3.
long parse_count(const std::string& text) {
    if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos) return 0;
    return std::stol(text);
}

// One sequence's row of `dataset` holds what the recomputation gives, or the output was not
// made from this input (and weights) with the options it records.
void expect_row_size(const std::string& path, const char* dataset, std::size_t found, std::size_t expected) {
    if (found == expected) return;
    throw Error(exit_invalid_input, path + ": dataset " + dataset + " holds " + std::to_string(found) +
                                        " values per sequence, expected " + std::to_string(expected) +
                                        " from the input and the recorded options; hint: check --input and --weights");
}

}  // namespace

int verify_command(const std::vector<std::string>& args) {
    const CommandSpec spec{
        "verify",
        "Recomputes sampled sequences of a run with the double-precision reference and reports the max\n"
        "abs/rel errors of /output, /lse and /attention; exit 0 only within tolerance. The run's options are\n"
        "read back from the output (its root attributes and recorded configuration).\n"
        "Tolerances (fp32 kernel vs fp64): output max abs error <= 2e-4 x max|output|; lse <= 2e-5 x max(1,|lse|);\n"
        "attention maps <= 1e-5 (f32) or 1e-3 (f16: half's 2^-11 relative rounding on values <= 1).\n"
        "A run with --precision bf16 (root attribute precision) is allowed twice the error of a plain bf16\n"
        "implementation on the same sequences (inputs and P rounded to bf16, fp32 accumulation: the\n"
        "flash-attention rule), plus the fp32 tolerances above.",
        "  attnbatch verify --input in.h5 --output out.h5\n"
        "  attnbatch verify --input in.h5 --weights proj.h5 --output out.h5 --samples all\n"};
    po::options_description options("verify options");
    options.add_options()
        ("input", po::value<std::string>(), "the run's input file [the one the output records, found from any directory]")
        ("output", po::value<std::string>()->required(), "the run's output file")
        ("weights", po::value<std::string>(), "the run's projection weights file [the one the output records, if any]")
        ("samples", po::value<std::string>()->default_value("8"), "sequences to recompute, evenly spaced, or 'all'");
    po::variables_map vm;
    if (!parse_command_line(spec, options, args, vm)) return exit_ok;
    const std::string input_path = vm.count("input") ? vm["input"].as<std::string>() : std::string();
    const std::string output_path = vm["output"].as<std::string>();

    {
        const io::OutputReader out(output_path);
        if (!out.complete()) {
            throw Error(exit_invalid_input, output_path + ": attribute " + io::attribute::complete +
                                                " is not 1 (the run did not finish); expected a complete output");
        }
        const RecordedRun run = read_recorded_run(out, input_path, vm.count("weights") ? vm["weights"].as<std::string>() : "");
        const io::InputSpec& in = run.input;
        const std::string& save = run.save_weights;
        // The maps are read in the dtype /attention has (read_recorded_run refused a /config
        // whose weights-dtype disagrees with it).
        const bool f16 = out.layout().weights_dtype == io::WeightsDtype::f16;
        const auto& proj = run.projections;
        const bool bf16 = run.attention.precision == kernels::Precision::bf16;

        const std::size_t n = in.n, len = in.len, heads = in.heads, dv = in.d_v;
        const std::size_t d_out = in.d_out();
        const bool stored_maps = save != "none";
        if (stored_maps && !out.has_attention()) {
            throw Error(exit_invalid_input, output_path + ": the run saved attention maps (--save-weights " + save + ") but " +
                                                io::dataset::attention + " is missing");
        }
        std::vector<std::int64_t> samples;
        const std::string samples_text = vm["samples"].as<std::string>();
        if (samples_text == "all") {
            for (std::size_t s = 0; s < n; ++s) samples.push_back(static_cast<std::int64_t>(s));
        } else {
            const long k = parse_count(samples_text);
            if (k < 1) throw Error(exit_usage, "--samples: '" + samples_text + "' is not a positive count or 'all'");
            const std::size_t count = std::min<std::size_t>(static_cast<std::size_t>(k), n);
            for (std::size_t i = 0; i < count; ++i)
                samples.push_back(count == 1 ? 0 : static_cast<std::int64_t>(i * (n - 1) / (count - 1)));
        }

        io::InputReader reader(in);
        check_recorded_shape(out, run);
        check_output_lengths(out, run, reader);
        SequenceInputs seq;
        std::vector<float> got_out, got_lse;
        ErrorStat e_out, e_lse, e_w;
        ErrorStat n_out, n_lse, n_w;  // the plain bf16 implementation's (bf16 runs)
        double lse_rel = 0, naive_lse_rel = 0;
        for (const std::int64_t s : samples) {
            load_sequence(run, reader, s, seq);
            const std::size_t rows = static_cast<std::size_t>(seq.length);
            const kernels::AttentionParams& p = seq.params;
            const auto [w_begin, w_end] = out.layout().weights_range(s, s + 1);
            const bool has_w = stored_maps && w_end > w_begin;
            const std::size_t w_heads = save == "mean" ? 1 : heads;
            std::vector<double> ref_out(heads * len * dv), ref_lse(heads * len), ref_w(has_w ? w_heads * len * len : 0);
            kernels::ReferenceOutputs ro;
            ro.out = ref_out.data();
            ro.lse = ref_lse.data();
            ro.weights = has_w ? ref_w.data() : nullptr;
            ro.weights_mean_over_heads = save == "mean";
            kernels::reference_attention_f64(p, ro);
            std::vector<double> naive_out, naive_lse, naive_w;
            if (bf16) {
                naive_out.resize(ref_out.size());
                naive_lse.resize(ref_lse.size());
                naive_w.resize(ref_w.size());
                kernels::ReferenceOutputs no = ro;
                no.out = naive_out.data();
                no.lse = naive_lse.data();
                no.weights = has_w ? naive_w.data() : nullptr;
                kernels::naive_attention_bf16(p, no);
            }

            // (H, L, d_v) -> (L, H*d_v), then the output projection in double.
            const auto project_output = [&](const std::vector<double>& per_head) {
                std::vector<double> attended(len * heads * dv);
                for (std::size_t h = 0; h < heads; ++h)
                    for (std::size_t i = 0; i < len; ++i)
                        for (std::size_t c = 0; c < dv; ++c) attended[i * heads * dv + h * dv + c] = per_head[(h * len + i) * dv + c];
                if (!proj || !in.weights->has_w_o) return attended;
                std::vector<double> projected(len * d_out, 0.0);
                for (std::size_t r = 0; r < rows; ++r)
                    for (std::size_t c = 0; c < d_out; ++c) {
                        double acc = proj->b_o.empty() ? 0.0 : proj->b_o[c];
                        for (std::size_t i = 0; i < heads * dv; ++i) acc += attended[r * heads * dv + i] * proj->w_o[i * d_out + c];
                        projected[r * d_out + c] = acc;
                    }
                return projected;
            };
            const std::vector<double> expected = project_output(ref_out);
            if (bf16) {
                const std::vector<double> naive_expected = project_output(naive_out);
                for (std::size_t i = 0; i < expected.size(); ++i) n_out.add(naive_expected[i], expected[i]);
                for (std::size_t i = 0; i < ref_lse.size(); ++i) {
                    n_lse.add(naive_lse[i], ref_lse[i]);
                    if (std::isfinite(ref_lse[i])) raise_to(naive_lse_rel, std::fabs(naive_lse[i] - ref_lse[i]) / std::max(1.0, std::fabs(ref_lse[i])));
                }
                for (std::size_t i = 0; i < naive_w.size(); ++i) n_w.add(naive_w[i], ref_w[i]);
            }
            out.read_output(s, s + 1, got_out);
            out.read_lse(s, s + 1, got_lse);
            // The rows stored: L (padded), or the sequence's own (packed: /output [T, D_out], /lse [H, T]).
            const std::size_t stored = out.layout().packed ? rows : len;
            expect_row_size(output_path, io::dataset::output, got_out.size(), stored * d_out);
            expect_row_size(output_path, io::dataset::lse, got_lse.size(), heads * stored);
            for (std::size_t i = 0; i < stored * d_out; ++i) e_out.add(got_out[i], expected[i]);
            for (std::size_t h = 0; h < heads; ++h) {
                for (std::size_t r = 0; r < stored; ++r) {
                    const double ref = ref_lse[h * len + r], got = got_lse[h * stored + r];
                    e_lse.add(got, ref);
                    if (std::isfinite(ref)) raise_to(lse_rel, std::fabs(got - ref) / std::max(1.0, std::fabs(ref)));
                    else if (!(std::isinf(got) && got < 0)) lse_rel = infinite;
                }
            }
            if (has_w) {
                std::vector<float> got_w;
                if (f16) {
                    std::vector<std::uint16_t> bits;
                    out.read_attention(s, s + 1, bits);
                    got_w.resize(bits.size());
                    for (std::size_t i = 0; i < bits.size(); ++i) got_w[i] = kernels::half_to_float(bits[i]);
                } else {
                    out.read_attention(s, s + 1, got_w);
                }
                expect_row_size(output_path, io::dataset::attention, got_w.size(), ref_w.size());
                for (std::size_t i = 0; i < ref_w.size(); ++i) e_w.add(got_w[i], ref_w[i]);
            }
        }
        // bf16: twice the plain bf16 implementation's error on these sequences (the flash-attention
        // rule), on top of the fp32 tolerances, which cover fp32 arithmetic and f16 storage.
        const double out_tol = 2e-4 * std::max(e_out.max_ref, 1e-30) + (bf16 ? 2.0 * n_out.max_abs : 0.0);
        const double lse_tol = 2e-5 + (bf16 ? 2.0 * naive_lse_rel : 0.0);
        const double w_tol = (f16 ? 1e-3 : 1e-5) + (bf16 ? 2.0 * n_w.max_abs : 0.0);
        // A tolerance made infinite by a non-finite plain bf16 figure would pass anything.
        const bool ok = std::isfinite(out_tol) && std::isfinite(lse_tol) && std::isfinite(w_tol) &&
                        e_out.max_abs <= out_tol && lse_rel <= lse_tol && e_w.max_abs <= w_tol;
        std::cout << std::scientific << std::setprecision(3) << "attnbatch verify: " << samples.size() << " of " << n
                  << " sequences recomputed in fp64" << (bf16 ? " (the run computed in bf16)" : "") << "\n";
        if (input_path.empty() || (in.weights && !vm.count("weights"))) {
            std::cout << "  recorded files found: input " << in.path << (in.weights ? ", weights " + in.weights->path : "")
                      << '\n';
        }
        std::cout
                  << "  output     max abs " << e_out.max_abs << "  max rel " << e_out.rel() << "  (tolerance " << out_tol << ")" << e_out.note() << "\n"
                  << "  lse        max abs " << e_lse.max_abs << "  max rel " << lse_rel << "  (tolerance ";
        if (bf16) std::cout << lse_tol; else std::cout << "2e-05";  // as before bf16 existed
        std::cout << " relative)" << e_lse.note() << "\n";
        if (stored_maps) {
            std::cout << "  attention  max abs " << e_w.max_abs << "  (tolerance " << w_tol << ", " << (f16 ? "f16" : "f32") << ")" << e_w.note() << "\n";
        }
        if (bf16) {
            std::cout << "  plain bf16 max abs " << n_out.max_abs << " (output), " << naive_lse_rel << " (lse, relative)"
                      << (stored_maps ? ", " : "") ;
            if (stored_maps) std::cout << n_w.max_abs << " (attention)";
            std::cout << "\n";
        }
        std::cout << (ok ? "  OK: within tolerance\n" : "  FAILED: outside tolerance\n");
        return ok ? exit_ok : exit_invalid_input;
    }
}

}  // namespace attnbatch::cli
