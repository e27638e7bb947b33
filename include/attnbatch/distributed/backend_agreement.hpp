// One kernel backend for every rank. Each rank resolving --isa best on its own CPU would take
// its own widest backend, and ranks on a cluster that mixes CPUs (AVX-512 nodes beside AVX2
// ones; bf16 ranks with and without AMX tiles) would compute other bits for the same sequence
// while the journal's identity records rank 0's choice. So the ranks agree on the first
// backend of the table that every one of them runs, and on AMX tiles only if every rank has
// them.
#pragma once

#include <functional>
#include <string>

#include "attnbatch/distributed/comm.hpp"
#include "attnbatch/kernels/attention.hpp"
#include "attnbatch/kernels/isa.hpp"

namespace attnbatch::distributed {

// What this rank can run: production passes the CPU's answers (agree_on_backend below);
// tests pass other ranks' CPUs.
struct RankBackends {
    std::function<bool(kernels::Isa)> runs;
    bool amx_tiles = false;  // bf16 would run on AMX tiles here (the CPU has them, Linux granted them)
};

// Collective. For the blocked kernel with --isa best, sets kernel.isa to the first backend of
// kernel.precision that every rank runs; for bf16, kernel.amx_permitted to whether every rank
// has the tiles. Returns, on every rank, a warning when some rank would have chosen otherwise
// alone ("" when none would). An explicit --isa is left alone (each rank checked it already).
// Throws Error(exit_usage) on every rank when no backend of the precision runs on all.
std::string agree_on_backend(Comm& comm, kernels::KernelOptions& kernel, const RankBackends& here);
std::string agree_on_backend(Comm& comm, kernels::KernelOptions& kernel);

}  // namespace attnbatch::distributed
