// Files that every rank of an MPI communicator opens together (MPI-IO through HDF5's mpio
// driver): create, open, close, flush and metadata writes become collective.
#pragma once

#include <mpi.h>

#include <string>

#include "attnbatch/io/h5/file.hpp"
#include "attnbatch/io/h5/handle.hpp"

namespace attnbatch::io {

// Whether this HDF5 library was built with MPI-IO (Debian's libhdf5-openmpi is).
bool hdf5_is_parallel() noexcept;

// The access that makes File::create/open collective over `comm`. The communicator must
// outlive every file opened with it. Error (exit 2) when this HDF5 is not parallel.
FileAccess mpi_io_access(MPI_Comm comm);

// The dataset-transfer property list of writes every rank makes together (collective MPI-IO;
// a rank with nothing to write joins with an empty selection).
class CollectiveTransfer {
public:
    CollectiveTransfer();  // Error (exit 2) when this HDF5 is not parallel
    hid_t id() const noexcept { return list_.id(); }
    // Why HDF5 fell back to independent I/O in the last transfer with this list, "" when it
    // stayed collective (or the library cannot tell).
    std::string fallback_cause() const;

private:
    PropertyListHandle list_;
};

}  // namespace attnbatch::io
