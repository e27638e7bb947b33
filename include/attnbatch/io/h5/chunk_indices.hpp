// Which chunks of a dataset a read went through, without hdf5.h: a read that returned touched
// every chunk its box overlaps, and each of them could be read (a filter that fails on one
// fails the read), so a scan for unreadable chunks (chunk_repair.hpp) can skip them.
#pragma once

#include "attnbatch/io/h5/dims.hpp"

#include <set>

namespace attnbatch::io {

// Chunks by their index along each axis (a chunk's origin divided by the chunk's extents).
using ChunkIndices = std::set<Dims>;

// Adds the chunks of a dataset chunked as `chunk` that `slab` overlaps (an empty slab is the
// whole dataset of `dims`; a box with no element adds none).
void add_chunks_of(const Dims& dims, const Dims& chunk, const Slab& slab, ChunkIndices& chunks);

}  // namespace attnbatch::io
