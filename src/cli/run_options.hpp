// The options of `run` (names fixed by docs/commands.md), parsed and checked into one struct.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attnbatch/distributed/job.hpp"
#include "attnbatch/kernels/attention.hpp"
#include "auto_count.hpp"

namespace attnbatch::cli {

// What `run` was asked: the job's settings, and how the command shows its progress.
struct RunOptions {
    bool stop = false;  // --help or --print-config was handled
    distributed::JobSettings job;
    std::string report, progress = "auto";
    double progress_interval = 30.0;
    bool verbose = false;
};

RunOptions parse_run_options(const std::vector<std::string>& args);

// --isa (shared by run and bench): best or a backend of this build that this CPU runs; the
// choices come from the kernels' backend table.
kernels::Isa parse_isa(const std::string& text);
// "best|avx512|...": every --isa choice of this build, or only those this CPU runs.
std::string isa_choices(bool runnable_only);

// --precision (shared by run and bench): fp32|bf16. bf16 needs a backend this CPU runs
// (AVX512-BF16, or AMX-BF16) and the blocked kernel (the reference computes in fp64).
kernels::Precision parse_precision(const std::string& text, kernels::KernelKind kind);
// The backend that runs --isa in --precision: best resolved among that precision's backends; an
// explicit isa must compute in it. Both refusals are Error with exit 2.
kernels::Isa resolve_isa_for(kernels::Isa isa, kernels::Precision precision);

// --block-q or --block-k (shared by run and bench): 0 for auto, else the tile size, at most
// INT_MAX; a negative or larger value is an Error (exit 2) naming `option`.
int parse_tile_size(AutoCount count, const std::string& option);

// "4G", "512M", "1.5GiB", "1000000": bytes; throws Error naming `option`.
std::size_t parse_bytes(const std::string& text, const std::string& option);

}  // namespace attnbatch::cli
