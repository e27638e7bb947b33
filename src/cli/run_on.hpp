// `run` for a caller that owns MPI and the communicator (the Python module): the same option
// parsing, checks and job as the command, on the Comm given.
#pragma once

#include <string>
#include <vector>

#include "attnbatch/distributed/comm.hpp"
#include "attnbatch/distributed/mpi_session.hpp"

namespace attnbatch::cli {

// Collective over `comm`. A failure the ranks agreed on (all of them, with the same code) is
// thrown on every rank as Error; one rank's own failure is thrown when the job has one rank,
// and otherwise ends the job (MPI_Abort), as with the command: the other ranks may be waiting
// for this one inside a collective.
void run_on(const distributed::MpiSession& mpi, distributed::Comm& comm, const std::vector<std::string>& args);

}  // namespace attnbatch::cli
