// A Comm over an MPI communicator made by someone else (mpi4py's), given by the address of its
// MPI_Comm handle (mpi4py: MPI._addressof(comm)): the caller needs no mpi.h, which stays inside
// src/distributed. The job's messages go over a duplicate of the communicator, so they never
// meet the caller's own; the duplicate is freed with the Comm. MPI must be initialised (and
// stays so: neither initialised nor finalised here).
#pragma once

#include <memory>

#include "attnbatch/distributed/comm.hpp"

namespace attnbatch::distributed {

// Collective over the communicator (MPI_Comm_dup).
std::unique_ptr<Comm> comm_over_handle(const void* mpi_comm_address);

}  // namespace attnbatch::distributed
