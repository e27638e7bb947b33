// The options of `run` (names fixed by SPEC.md), parsed and checked into one struct.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attnbatch/io/input.hpp"
#include "attnbatch/io/output.hpp"
#include "attnbatch/kernels/attention.hpp"

namespace attnbatch::cli {

struct RunOptions {
    bool stop = false;  // --help or --print-config was handled
    io::InputOptions input;
    std::string output;
    bool causal = false;
    double scale = 0.0;  // 0: 1/sqrt(d_k)
    io::SaveWeights save_weights = io::SaveWeights::all;
    io::WeightsDtype weights_dtype = io::WeightsDtype::f32;
    bool weights_seqs_given = false;
    std::int64_t weights_first = 0, weights_last = -1;
    int gzip_level = 0;
    std::string io_mode = "auto";
    std::string schedule = "static";
    kernels::KernelOptions kernel;
    std::size_t max_memory = 0;
    std::int64_t unit_sequences = 0;  // 0: as many as --max-memory allows
    bool resume = false, force = false, dry_run = false;
    int simulate_ranks = 0;  // --dry-run for this many ranks (0: the ranks of this run)
    std::string report, progress = "auto";
    double progress_interval = 30.0;
    bool verbose = false;
    std::string resolved_config;  // every option as resolved, recorded in the output
};

RunOptions parse_run_options(const std::vector<std::string>& args);

// --isa (shared by run and bench): best or a backend of this build that this CPU runs; the
// choices come from the kernels' backend table.
kernels::Isa parse_isa(const std::string& text);
// "best|avx512|...": every --isa choice of this build, or only those this CPU runs.
std::string isa_choices(bool runnable_only);

// "4G", "512M", "1.5GiB", "1000000": bytes; throws Error naming `option`.
std::size_t parse_bytes(const std::string& text, const std::string& option);

}  // namespace attnbatch::cli
