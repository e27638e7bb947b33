#include "attnbatch/io/h5/library.hpp"

#include <hdf5.h>

#include "h5/check.hpp"

namespace attnbatch::io {

void start_hdf5() {
    H5dont_atexit();
    H5open();
    detail::quiet_hdf5_errors();
}

}  // namespace attnbatch::io
