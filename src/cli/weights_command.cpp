// `attnbatch weights`: attention maps of chosen sequences and heads, recomputed on demand from
// a finished run's /lse and its inputs, for runs that did not store them (or stored only the
// head mean): P[i, j] = exp(scale * q_i . k_j - lse[i]) for visible keys, else 0.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>
#include <sys/stat.h>

#include "attnbatch/error.hpp"
#include "attnbatch/io/h5/file_paths.hpp"
#include "attnbatch/io/output/attention_maps.hpp"
#include "attnbatch/io/output/output_paths.hpp"
#include "attnbatch/io/output/output_reader.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "attnbatch/kernels/bf16.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "ranges.hpp"
#include "recorded_run.hpp"
#include "recorded_run_checks.hpp"

namespace attnbatch::cli {


int weights_command(const std::vector<std::string>& args) {
    const CommandSpec spec{
        "weights",
        "Recomputes attention maps of chosen sequences and heads from a run's /lse and its inputs, into a\n"
        "new HDF5 file (/attention float32 [S, H_sel, L, L] with attributes sequences and heads) or a CSV of\n"
        "sequence,head,query,key,weight for every visible (unmasked) pair.",
        "  attnbatch weights --input in.h5 --output out.h5 --sequences 0:4 --to maps.h5\n"
        "  attnbatch weights --input in.h5 --output out.h5 --sequences 7 --heads 0,2 --to seq7.csv\n"};
    po::options_description options("weights options");
    options.add_options()
        ("input", po::value<std::string>(), "the run's input file [the one the output records, found from any directory]")
        ("output", po::value<std::string>()->required(), "the run's (complete) output file")
        ("weights", po::value<std::string>(), "the run's projection weights file [the one the output records, if any]")
        ("sequences", po::value<std::string>()->value_name("RANGE"), "sequences (input numbering): n, A:B, :B, A: or a comma list of them [the output's first]")
        ("heads", po::value<std::string>()->value_name("RANGE")->default_value("all"), "heads: n, A:B, :B, A:, a comma list of them, or all")
        ("to", po::value<std::string>()->required(), "result file: .h5/.hdf5 for HDF5, .csv for CSV")
        ("force", po::bool_switch(), "replace an existing --to file");
    po::variables_map vm;
    if (!parse_command_line(spec, options, args, vm)) return exit_ok;
    const std::string to = vm["to"].as<std::string>();
    const bool csv = to.size() > 4 && to.compare(to.size() - 4, 4, ".csv") == 0;
    const bool h5 = (to.size() > 3 && to.compare(to.size() - 3, 3, ".h5") == 0) ||
                    (to.size() > 5 && to.compare(to.size() - 5, 5, ".hdf5") == 0);
    if (!csv && !h5) throw Error(exit_usage, "--to: '" + to + "' must end in .h5, .hdf5 or .csv");
    struct stat existing {};
    if (::stat(to.c_str(), &existing) == 0 && !vm["force"].as<bool>()) {
        throw Error(exit_usage, "--to: " + to + " exists; hint: --force replaces it");
    }
    {
        const io::OutputReader out(vm["output"].as<std::string>());
        if (!out.complete()) {
            throw Error(exit_invalid_input, vm["output"].as<std::string>() + ": attribute " + io::attribute::complete +
                                                " is not 1; expected a finished run's output");
        }
        const RecordedRun run = read_recorded_run(out, vm.count("input") ? vm["input"].as<std::string>() : "",
                                                  vm.count("weights") ? vm["weights"].as<std::string>() : "");
        const io::InputSpec& in = run.input;
        // The maps are only as right as the files are the run's: what the output records of
        // them must match, and nothing read may be overwritten.
        io::check_output_is_not_an_input(to, {{"--output", vm["output"].as<std::string>()}, {"the input", in.path},
                                              {"the weights", in.weights ? in.weights->path : std::string()}},
                                         "--to");
        check_recorded_shape(out, run);
        check_recorded_weights(out, run);
        // Sequences are named as in the input (and in run --sequences); the output's rows start
        // at its first_sequence.
        const std::int64_t first = in.first_sequence, end = first + in.n;
        const auto not_held = [&](std::int64_t sequence) {
            return Error(exit_usage, "--sequences: sequence " + std::to_string(sequence) + " is not in " +
                                         vm["output"].as<std::string>() + ", which holds the sequences " +
                                         format_range(first, end) + " (run --sequences)");
        };
        std::vector<std::int64_t> sequences{first};
        if (vm.count("sequences")) {
            const std::vector<IndexRange> ranges = parse_ranges(vm["sequences"].as<std::string>(), "--sequences");
            // Past the output's end is not past the input's N (a run --sequences output holds
            // part of it): the same message as before its start.
            for (const IndexRange& range : ranges) {
                if (range.first < first) throw not_held(range.first);
                if (range.first >= end || (range.last && *range.last > end)) throw not_held(std::max(range.first, end));
            }
            sequences = expand_ranges(ranges, end, "--sequences", "N");
        }
        const std::vector<std::int64_t> heads =
            expand_ranges(parse_ranges(vm["heads"].as<std::string>(), "--heads"), in.heads, "--heads", "H");
        const std::size_t len = in.len, dk = in.d_k;
        // A bf16 run's logits came from Q and K rounded to bf16: so do these, or a row would not
        // sum to 1 against the run's /lse.
        const bool bf16 = run.attention.precision == kernels::Precision::bf16;
        const auto operand = [bf16](float x) { return static_cast<double>(bf16 ? kernels::round_to_bf16(x) : x); };
        io::InputReader reader(in);
        check_output_lengths(out, run, reader);
        SequenceInputs seq;
        std::vector<float> lse;
        std::vector<float> maps(sequences.size() * heads.size() * len * len, 0.0f);  // (S, H_sel, L, L)
        for (std::size_t si = 0; si < sequences.size(); ++si) {
            const std::int64_t s = sequences[si] - first;  // the row of the output and of the selection
            load_sequence(run, reader, s, seq);
            out.read_lse(s, s + 1, lse);
            // The rows /lse holds for it: L, or its own in the packed layout ([H, T]).
            const std::size_t stored = out.layout().packed ? static_cast<std::size_t>(seq.length) : len;
            if (lse.size() != static_cast<std::size_t>(in.heads) * stored) {
                throw Error(exit_invalid_input, vm["output"].as<std::string>() + ": dataset " + io::dataset::lse + " holds " +
                                                    std::to_string(lse.size()) + " values for sequence " + std::to_string(s) +
                                                    ", expected H*rows = " +
                                                    std::to_string(static_cast<std::size_t>(in.heads) * stored) +
                                                    " from the input; hint: check --input");
            }
            const kernels::AttentionParams& p = seq.params;
            for (std::size_t hi = 0; hi < heads.size(); ++hi) {
                const std::int64_t h = heads[hi];
                float* map = maps.data() + (si * heads.size() + hi) * len * len;
                for (std::int64_t i = 0; i < seq.length; ++i) {
                    const float* q = p.q + h * p.q_strides.head + i * p.q_strides.row;
                    const std::int64_t keys = run.attention.causal ? std::min<std::int64_t>(seq.length, i + 1) : seq.length;
                    const double row_lse = lse[static_cast<std::size_t>(h) * stored + static_cast<std::size_t>(i)];
                    // A row that sees a key has a finite log-sum-exp; any other value would make
                    // the whole row of the map NaN, 0 or inf, written as if it were a result.
                    if (!std::isfinite(row_lse)) {
                        throw Error(exit_invalid_input, vm["output"].as<std::string>() + ": dataset " + io::dataset::lse +
                                                            " holds " + std::to_string(row_lse) + " for sequence " +
                                                            std::to_string(sequences[si]) + ", head " + std::to_string(h) +
                                                            ", row " + std::to_string(i) +
                                                            ", expected a finite value (the row sees " + std::to_string(keys) +
                                                            " keys); hint: attnbatch verify checks the output");
                    }
                    for (std::int64_t j = 0; j < keys; ++j) {
                        const float* k = p.k + kernels::kv_head_of(p, static_cast<int>(h)) * p.k_strides.head + j * p.k_strides.row;
                        double dot = 0;
                        for (std::size_t c = 0; c < dk; ++c) dot += operand(q[c]) * operand(k[c]);
                        map[static_cast<std::size_t>(i) * len + static_cast<std::size_t>(j)] =
                            static_cast<float>(std::exp(dot * run.attention.scale - row_lse));
                    }
                }
            }
        }
        if (h5) {
            io::AttentionMaps result;
            result.sequences = sequences;
            result.heads = heads;
            result.len = in.len;
            result.values = std::move(maps);
            result.source = vm["output"].as<std::string>();
            result.source_absolute = io::real_path(result.source);
            io::write_attention_maps(to, result, vm["force"].as<bool>());
        } else {
            std::ofstream csv_out(to);
            if (!csv_out) throw Error(exit_io, "--to: cannot write " + to);
            csv_out << "sequence,head,query,key,weight\n";
            csv_out.precision(9);
            for (std::size_t si = 0; si < sequences.size(); ++si)
                for (std::size_t hi = 0; hi < heads.size(); ++hi)
                    for (std::size_t i = 0; i < len; ++i)
                        for (std::size_t j = 0; j < len; ++j) {
                            const float w = maps[((si * heads.size() + hi) * len + i) * len + j];
                            if (w != 0.0f) csv_out << sequences[si] << ',' << heads[hi] << ',' << i << ',' << j << ',' << w << '\n';
                        }
            if (!csv_out) throw Error(exit_io, "--to: writing " + to + " failed");
        }
        std::cout << "attnbatch weights: sequences " << format_indices(sequences) << " x heads " << format_indices(heads)
                  << " of L = " << len << " -> " << to << '\n';
        return exit_ok;
    }
}

}  // namespace attnbatch::cli
