// Files that every rank of an MPI communicator opens together (MPI-IO through HDF5's mpio
// driver): create, open, close, flush and metadata writes become collective.
#pragma once

#include <mpi.h>

#include <string>

#include "attnbatch/io/h5/file_access.hpp"

namespace attnbatch::io {

// Whether this HDF5 library was built with MPI-IO (Debian's libhdf5-openmpi is).
bool hdf5_is_parallel() noexcept;

// The access that makes File::create/open collective over `comm`. The communicator must
// outlive every file opened with it. Error (exit 2) when this HDF5 is not parallel.
FileAccess mpi_io_access(MPI_Comm comm);

}  // namespace attnbatch::io
