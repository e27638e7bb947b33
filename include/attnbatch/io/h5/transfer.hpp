// How a read or a write moves data in a file that every rank opened together (MPI-IO):
//   independent  each rank on its own: HDF5's default, and the only way for a file one
//                process opened alone;
//   collective   every rank in the same call, a rank with nothing to move joining with an
//                empty selection: what parallel HDF5 needs for writes that allocate storage
//                (compressed chunks).
// The property lists behind them stay inside io.
#pragma once

#include <string>

namespace attnbatch::io {

enum class Transfer { independent, collective };

// Why HDF5 fell back to independent I/O in this process's last collective transfer, "" when
// it stayed collective, when there was none, or when the library cannot tell.
std::string collective_fallback_cause();

}  // namespace attnbatch::io
