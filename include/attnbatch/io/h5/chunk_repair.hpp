// Compressed chunks that can no longer be read. A crash of the node can leave a chunk's bytes
// half on the disk; a compressed chunk then fails its filter (deflate's inflate() or its
// checksum) on every read, and HDF5 must read a chunk to write part of it, so rewriting the
// units it holds fails too, on every resume. Replacing such a chunk makes it writable again
// without reading it.
#pragma once

#include "attnbatch/io/h5/chunk_indices.hpp"
#include "attnbatch/io/h5/dataset.hpp"

#include <cstddef>

namespace attnbatch::io {

// Reads every stored chunk of a filtered dataset but those in `read_back` (read without error
// already) and replaces each one whose read fails with a chunk of zeros, filtered as the
// dataset's chunks are (H5Dwrite_chunk of the bytes HDF5 stores for it, so that nothing reads
// the damaged bytes). Returns how many were replaced; 0 for a dataset without filters, without
// touching it. The zeros stand for data that is lost anyway: every unit with bytes in such a
// chunk fails its checksum, or was never recorded done, and is computed again. Serial access
// only (HDF5 1.10 cannot write chunks directly under MPI-IO).
std::size_t reset_unreadable_chunks(const Dataset& dataset, const ChunkIndices& read_back = {});

}  // namespace attnbatch::io
