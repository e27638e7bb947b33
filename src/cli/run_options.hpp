// The options of `run` (names fixed by SPEC.md), parsed and checked into one struct.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attnbatch/distributed/job.hpp"
#include "attnbatch/kernels/attention.hpp"

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

// "4G", "512M", "1.5GiB", "1000000": bytes; throws Error naming `option`.
std::size_t parse_bytes(const std::string& text, const std::string& option);

}  // namespace attnbatch::cli
