// The data-transfer property list behind a Transfer, for the calls that take one.
#pragma once

#include "attnbatch/io/h5/transfer.hpp"

#include <hdf5.h>

namespace attnbatch::io::detail {

// H5P_DEFAULT for independent transfers; for collective ones the process's one collective
// list (made on first use, never closed: the library is never shut down, see library.hpp).
// Error (exit 2) when this HDF5 is not parallel.
hid_t transfer_list(Transfer transfer);

}  // namespace attnbatch::io::detail
