// The HDF5 objects an OutputFile holds, shared by the sources that write, journal and read
// them back (output_file.cpp, output_journal.cpp, output_spans.cpp).
#pragma once

#include "attnbatch/io/h5/chunk_indices.hpp"
#include "attnbatch/io/h5/dataset.hpp"
#include "attnbatch/io/h5/file.hpp"
#include "attnbatch/io/output/output_file.hpp"

#include <optional>
#include <vector>

namespace attnbatch::io {

// How the output file is placed and cached. Uncompressed: objects on page bounds, so that whole
// chunks can be written around HDF5 (direct_chunks.hpp), and no chunk cache, so that HDF5 holds
// no raw data that such writes would leave stale (under MPI-IO it holds none anyway).
// Compressed: no such writes (they decline filters), so no alignment either, which padded each
// small chunk to a page. Compressed chunks move when rewritten: their freed space is not
// reused, so that what the last checkpoint flushed survives a kill before the next (without it
// a resume found those units damaged and could not rewrite their chunks: 'inflate() failed',
// or HDF5 crashed). So chunks are no larger than a step writes (OutputLayout::chunk_sequences),
// and the file grows only by the compressed fills of creation and the chunks that two steps
// share.
inline FileTuning output_file_tuning(const OutputLayout& layout) {
    FileTuning tuning;
    tuning.alignment = layout.gzip_level == 0 ? 4096 : 0;
    tuning.chunk_cache = layout.gzip_level != 0;
    tuning.reuse_freed_space = layout.gzip_level == 0;
    return tuning;
}

// Adds the chunks of `dataset` that `slabs` overlap (nothing for a contiguous dataset): the
// chunks a check read without error (OutputFile::ChunksReadBack).
inline void note_chunks_read(const Dataset& dataset, const std::vector<Slab>& slabs, ChunkIndices& chunks) {
    const Dims chunk = dataset.chunk();
    if (chunk.empty()) return;
    const Dims dims = dataset.dims();
    for (const Slab& slab : slabs) add_chunks_of(dims, chunk, slab, chunks);
}

struct OutputFile::Handles {
    File file;
    std::optional<Dataset> output, attention, lse, lengths, offsets;
    std::optional<Dataset> journal_progress;
};

}  // namespace attnbatch::io
