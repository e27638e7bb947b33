// Comm over an MPI communicator: with mpi_session.cpp the only place besides io's MPI-IO
// that talks MPI.
#pragma once

#include <mpi.h>

#include <memory>

#include "attnbatch/distributed/comm.hpp"

namespace attnbatch::distributed {

// The communicator must outlive the returned object; it is not duplicated.
std::unique_ptr<Comm> make_mpi_comm(MPI_Comm communicator);

}  // namespace attnbatch::distributed
