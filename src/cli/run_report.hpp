// `run --report FILE.json`: the run's figures, per rank, in JSON.
#pragma once
#include <string>

#include "attnbatch/distributed/job.hpp"
#include "attnbatch/distributed/mpi_session.hpp"

namespace attnbatch::cli {

// Error (exit 2 or 4) when FILE could not be written at the end of the run: checked before it.
void check_report_path(const std::string& report);
// `mpi_init`: the slowest rank's seconds in MPI_Init.
void write_report(const std::string& path, const distributed::Job& job, const distributed::JobResult& result,
                  double mpi_init, const distributed::Messaging& messaging);

}  // namespace attnbatch::cli
