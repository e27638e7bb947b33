// The HDF5 RAII layer in one include: errors, handles, types, files, datasets, attributes.
// No HDF5 call may run inside an OpenMP parallel region (see handle.hpp).
#pragma once

#include "attnbatch/io/h5/attribute.hpp"
#include "attnbatch/io/h5/dataset.hpp"
#include "attnbatch/io/h5/error.hpp"
#include "attnbatch/io/h5/file.hpp"
#include "attnbatch/io/h5/handle.hpp"
#include "attnbatch/io/h5/types.hpp"
