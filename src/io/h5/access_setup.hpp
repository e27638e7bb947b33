// What a FileAccess does to HDF5's file-access property list before a file is created or
// opened (mpi_io_access: the MPI-IO driver over a communicator).
#pragma once

#include "attnbatch/io/h5/file_access.hpp"

#include <hdf5.h>

#include <functional>

namespace attnbatch::io::detail {

struct AccessSetup {
    std::function<void(hid_t fapl)> configure;
};

}  // namespace attnbatch::io::detail
