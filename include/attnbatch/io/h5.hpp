// The HDF5 RAII layer in one include: errors, handles, types, files, datasets, attributes.
// No HDF5 call may run inside an OpenMP parallel region (see h5_handle.hpp).
#pragma once

#include "attnbatch/io/h5_attribute.hpp"
#include "attnbatch/io/h5_dataset.hpp"
#include "attnbatch/io/h5_error.hpp"
#include "attnbatch/io/h5_file.hpp"
#include "attnbatch/io/h5_handle.hpp"
#include "attnbatch/io/h5_types.hpp"
