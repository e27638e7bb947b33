// What `attnbatch run` prints on rank 0, on stdout.
#pragma once
#include "attnbatch/distributed/job.hpp"
#include "attnbatch/distributed/mpi_session.hpp"

namespace attnbatch::cli {

// The input, the settings and the resources the job resolved.
// `messaging`: what the rank printing found (MpiSession::messaging).
void print_header(const distributed::Job& job, const distributed::Messaging& messaging);
// The plan: units, steps and each rank's share (under several ranks, and for --dry-run).
void print_plan(const distributed::Job& job);
// The `done:` line and the PERFORMANCE line.
void print_summary(const distributed::Job& job, const distributed::JobResult& result);
// A stop signal after the last stop point: the run went on to publish OUTPUT (or had
// nothing left to do) and exits 0, saying so.
void note_late_stop();

}  // namespace attnbatch::cli
