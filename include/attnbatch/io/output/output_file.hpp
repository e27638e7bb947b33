// The output file of a run, exactly as docs/formats.md "Output file" describes it:
//   /output     float32 [N, L, D_out]                      labels N, L, D
//   /attention  float32 or float16 [B-A, H, L, L]           labels N, H, L_q, L_k
//               ([B-A, 1, L, L] for the mean over heads; attribute first_sequence = A)
//   /lse        float32 [N, H, L]                           labels N, H, L
//   /lengths    int32 [N]                                   label N
//   /config     scalar UTF-8 string: the full resolved configuration
// plus root attributes for provenance and `complete`, 0 until finalize() sets it to 1, and
// dimension scales /N, /L, /D_out, /H, /L_k (and /N_w, /H_mean for a subset or the mean of the
// attention maps) attached to every axis, so that netCDF readers show the axes' names.
//
// The file is written as OUTPUT.partial and renamed to OUTPUT only once complete, so a file
// named OUTPUT is always whole; an existing OUTPUT is replaced (with force) only by that
// final rename, never deleted before.
//
// The packed layout (docs/formats.md "packed layout", for a packed input) stores the rows of every
// sequence end to end instead:
//   /output     float32 [T, D_out]                         labels T, D
//   /lse        float32 [H, T]                             labels H, T
//   /offsets    int64 [N+1]: sequence n is rows [offsets[n], offsets[n+1])
//   /lengths    int32 [N], /attention as above, per sequence with L the longest sequence (a
//               map's rows past its sequence's length stay zero, as HDF5 allocates them)
// and the root attribute sequence_layout = "packed".
//
// Progress for resuming is the journal (journal.hpp): units are recorded as done, with a
// checksum, by checkpoint() once their data is flushed. /lengths is also filled with -1 and
// /lse with NaN at creation, so a reader sees unwritten sequences as such; /output and (but in
// the packed layout) /attention, which the run writes whole, are never filled: filling them
// at creation would write every byte of the output twice.
#pragma once

#include "attnbatch/error.hpp"
#include "attnbatch/io/h5/chunk_indices.hpp"
#include "attnbatch/io/h5/file_access.hpp"
#include "attnbatch/io/h5/transfer.hpp"
#include "attnbatch/io/output/journal.hpp"
#include "attnbatch/io/output/output_layout.hpp"
#include "attnbatch/io/output/output_paths.hpp"
#include "attnbatch/io/output/provenance.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <map>
#include <vector>

namespace attnbatch::io {

class File;  // h5/file.hpp
class Writeback;  // output/writeback.hpp
class WriteTurns;  // output/write_turns.hpp
class DirectChunks;  // output/direct_chunks.hpp
class WritePathChoice;  // output/write_path_choice.hpp
class Dataset;  // attnbatch/io/h5/dataset.hpp

struct OutputOptions {
    bool force = false;  // replace an existing OUTPUT at the final rename; discard a stale .partial
    FileAccess access;
    // The caller already ran prepare_output_path(). Under MPI one rank must do that before
    // the collective create: a rank still checking would otherwise see the new .partial.
    bool paths_prepared = false;
    // The units the run will record as done (see journal.hpp); without it no journal is
    // written and checkpoint() only flushes.
    std::optional<JournalPlan> journal;
    // Packed layout: /offsets is written at creation, each of `writers` ranks of a collective
    // creation its part `writer` (independent writes of disjoint rows).
    int writer = 0, writers = 1;
    // Whether publication waits for the disk (run --fsync on|off): see set_fsync().
    bool fsync = true;
};

class OutputFile {
public:
    // Creates OUTPUT.partial with every dataset, label and attribute (complete = 0) and
    // flushes it. Error: exit 2 when OUTPUT (or a stale .partial) exists without
    // force or the layout is unusable; exit 4 when the file cannot be created.
    static OutputFile create(const std::string& output_path, const OutputLayout& layout,
                             const Provenance& provenance, const OutputOptions& options = {});
    // Opens OUTPUT.partial read-write to go on with it (--resume); the layout must be the
    // one it was created with (the journal's identity says so). Collective under MPI-IO.
    // Error exit 4 when it cannot be opened or has no journal.
    static OutputFile reopen(const std::string& output_path, const OutputLayout& layout,
                             const FileAccess& access = {}, FileMode mode = FileMode::read_write);

    const OutputLayout& layout() const noexcept { return layout_; }
    const std::string& path() const noexcept { return path_; }  // the final OUTPUT
    std::string partial_path() const { return partial_path_for(path_); }
    bool force() const noexcept { return force_; }  // publishing may replace an existing OUTPUT
    // On (the default): each checkpoint starts the disk write of what it recorded, without
    // waiting for it, and publication waits for the rest (fsync). Off (run --fsync off, for
    // scratch file systems): what goes through the page cache is left for the kernel to write
    // when it will; neither checkpoints, close_complete() nor publication wait for the disk.
    void set_fsync(bool fsync) noexcept { fsync_ = fsync; }
    bool fsync() const noexcept { return fsync_; }
    // Whether this process's compute runs (true while a step computes; null: never known).
    // Without fsync, whole chunks written while it runs go past the page cache
    // (write_path_choice.hpp). The flag must outlive its watching, or be unset first.
    void watch_compute(const std::atomic<bool>* computing) noexcept { computing_ = computing; }
    // Sequences per /output chunk: work units that are multiples of it write whole chunks.
    std::int64_t sequences_per_chunk() const noexcept { return sequences_per_chunk_; }
    File& file() noexcept;  // the HDF5 file itself, for io's tests
    // Bytes of /output and /attention this rank wrote straight to the disk: independent writes
    // of whole chunks of an uncompressed output go around HDF5, with fsync on past the page
    // cache (O_DIRECT), as their bytes must reach the disk before publication anyway, with it
    // off whichever way has cost less (write_path_choice.hpp); the rest goes through HDF5.
    std::uint64_t direct_bytes() const noexcept;

    // Writes sequences [first, last) of every dataset (lengths last). Collective under
    // MPI-IO: every rank calls it the same number of times, with an empty range if need be.
    // With a journal, [first, last) must be whole units; their checksums wait for checkpoint().
    void write_block(std::int64_t first, std::int64_t last, const OutputBlock& block,
                     Transfer transfer = Transfer::independent);
    // How processes sharing this file write its data: each its own rows independently (an
    // uncompressed output is placed at creation, so no write changes metadata), except
    // compressed data under MPI-IO, which parallel HDF5 writes collectively only (a compressed
    // chunk's size and place change as it is written).
    Transfer data_transfer() const;
    // Writes a span (any layout, whole sequences or a piece) from a block in the canonical
    // layout above; the same one H5Dwrite per dataset, in the same order, as write_block(), so
    // ranks writing spans of either kind meet in every collective write. With a journal the
    // span must be whole units.
    void write_span(const OutputSpan& span, const OutputBlock& block, Transfer transfer = Transfer::independent);

    void flush();
    // Flush, record the units written since the last checkpoint as done, flush again.
    // Collective under MPI-IO (every rank, the same number of times). Under MPI-IO, an
    // uncompressed output is not flushed here: see checkpoint_flushes().
    void checkpoint(Transfer transfer = Transfer::independent);
    // Whether checkpoint() flushes. Under MPI-IO a flush syncs the file to its device on every
    // rank, a wait for the disk each round. An uncompressed output needs no flush to be
    // resumable: every dataset is placed at creation (whose flush wrote all the metadata), so
    // no write changes metadata, and MPI-IO caches no data, so a write is in the file once it
    // returns and survives the process being killed. (Writes still in the operating system's
    // cache when a node crashes fail their checksum on --resume and are computed again.)
    bool checkpoint_flushes() const noexcept { return checkpoint_flushes_; }
    // The journal as stored (serial: reads with the default transfer).
    JournalState journal_state() const;
    // The run's options as its creation recorded them (OutputReader::recorded_options()).
    std::map<std::string, std::string> recorded_options() const;
    // The chunks of each dataset a check read without error.
    struct ChunksReadBack {
        ChunkIndices output, attention, lse, lengths;
    };
    // The units marked done whose data no longer match their checksum, read back unit by
    // unit (memory: one unit's data); only units [first_unit, last_unit) when given, so that
    // a caller can check a large file in slices. `read_back`, when given, gains the chunks
    // read without error.
    std::vector<std::int64_t> units_failing_checksum(const JournalState& state, std::size_t first_unit = 0,
                                                     std::size_t last_unit = SIZE_MAX,
                                                     ChunksReadBack* read_back = nullptr) const;
    // The compressed chunks that cannot be read, replaced so that they can be written again
    // (chunk_repair.hpp); how many. Chunks in `read_back` are known to be readable and are not
    // read again. A unit with data in a replaced chunk failed units_failing_checksum() (a unit
    // whose data cannot be read fails it) or was never recorded done. Serial.
    std::size_t reset_unreadable_chunks(const ChunksReadBack& read_back);
    // complete = 1, flush, close every object and the file. Collective under MPI-IO.
    void close_complete();
    // Flush and close, complete stays 0: the end of a failed or interrupted run, called on
    // purpose (collective under MPI-IO) rather than left to the destructor.
    void close_incomplete();
    // close_complete(), then publish_output(): the serial end of a run.
    void finalize();

    OutputFile(OutputFile&&) noexcept;
    OutputFile& operator=(OutputFile&&) noexcept;
    ~OutputFile();

private:
    OutputFile();
    struct Handles;  // the file and its datasets (output_handles.hpp)
    std::unique_ptr<Handles> h5_;
    OutputLayout layout_;
    std::string path_;
    bool force_ = false;
    bool fsync_ = true;
    std::unique_ptr<Writeback> writeback_;  // started at the first checkpoint, with fsync_
    std::unique_ptr<WriteTurns> write_turns_;  // made at the first independent write under MPI-IO
    bool mpi_io_ = false;  // written through MPI-IO (set after create or reopen)
    // The turns an independent write under MPI-IO takes (write_turns.hpp); nullptr: none.
    const WriteTurns* write_turns(Transfer transfer);
    // Independent writes of whole chunks of /output and /attention go around HDF5
    // (direct_chunks.hpp), made at their first such write; nullptr: through HDF5.
    std::unique_ptr<DirectChunks> direct_output_, direct_maps_;
    std::uint64_t direct_bytes_closed_ = 0;  // by direct writers already closed
    DirectChunks* direct_chunks(std::unique_ptr<DirectChunks>& slot, const std::optional<Dataset>& dataset,
                                Transfer transfer);
    // Without fsync_ the way around HDF5 is chosen by cost; with it, past the page cache.
    std::unique_ptr<WritePathChoice> write_path_;  // made at the first such write
    const std::atomic<bool>* computing_ = nullptr;  // watch_compute()
    // The whole chunks among elements [first, first + count) of `dataset` (row-major) around
    // HDF5; returns the elements [begin, end) written that way (begin == end: none, all go
    // through HDF5).
    std::pair<std::uint64_t, std::uint64_t> write_whole_chunks(std::unique_ptr<DirectChunks>& slot,
                                                               const std::optional<Dataset>& dataset, std::uint64_t first,
                                                               std::uint64_t count, const void* data, Transfer transfer);
    // Rows [first, first + count) of `dataset`, `row` elements each: its whole chunks around
    // HDF5 (write_whole_chunks), the rest through it.
    template <class T>
    void write_chunked_rows(std::unique_ptr<DirectChunks>& slot, const std::optional<Dataset>& dataset, std::uint64_t first,
                            std::uint64_t count, std::size_t row, const T* data, Transfer transfer);
    // Elements [first, first + count) of `dataset`: its whole chunks around HDF5 from a
    // page-aligned staging buffer, batch by batch (fill(dst, begin, end) puts elements
    // [begin, end) there as the file stores them); the parts of a chunk at either end, a batch
    // the way around declined, or all of it where no chunk is whole, through
    // through_hdf5(begin, end).
    template <class Fill, class ThroughHdf5>
    void write_staged(std::unique_ptr<DirectChunks>& slot, const std::optional<Dataset>& dataset, std::uint64_t first,
                      std::uint64_t count, Fill fill, ThroughHdf5 through_hdf5, Transfer transfer);
    struct StagingFree {
        void operator()(char* p) const noexcept;
    };
    std::unique_ptr<char, StagingFree> staging_;  // page-aligned, staging_bytes_ long
    std::size_t staging_bytes_ = 0;
    char* staging(std::size_t bytes);
    // The maps of a packed span as the file stores them: every sequence's map L rows long, zeros
    // past its length (the uncompressed packed file has no fill: every element is written once).
    void write_packed_maps(const OutputSpan& span, const void* maps, Transfer transfer);
    // Zeros in rows [row, end) of map `map`, head `head` of /attention, through HDF5.
    void write_zero_map_rows(std::uint64_t map, std::uint64_t head, std::uint64_t row, std::uint64_t end, Transfer transfer);
    // Rows [first, first + count) of a packed /output: whole chunks around HDF5 (through the
    // staging buffer where the step's memory is not on a page bound at a chunk's start).
    void write_packed_rows(std::uint64_t first, std::uint64_t count, const float* rows, Transfer transfer);
    std::int64_t sequences_per_chunk_ = 1;
    void create_journal(const JournalPlan& plan);
    // The checksums of the units [first, last) of a block that starts at block_first.
    void remember_checksums(std::int64_t block_first, std::int64_t first, std::int64_t last, const OutputBlock& block);
    // Writes the maps of sequences [first, last) of a block whose maps start at the weights
    // row block_maps_first (layout().weights_range's numbering).
    void write_maps(std::int64_t block_maps_first, std::int64_t first, std::int64_t last, const OutputBlock& block,
                    Transfer transfer);
    void remember_span_checksums(const OutputSpan& span, const OutputBlock& block);
    void open_journal();
    // The datasets of an open file (their shapes checked against the layout), not the journal.
    void open_datasets();
    // Every dataset, then the file, closed without a flush (closing writes the metadata).
    void close_handles();
    void create_padded(const Provenance& provenance, const OutputOptions& options);
    void create_packed(const OutputOptions& options);
    // The journal's units [begin, end) making up a span (std::logic_error when it is not whole units).
    std::pair<std::size_t, std::size_t> units_of(const OutputSpan& span) const;
    OutputSpan unit_span(std::size_t unit) const;
    // XXH3-64 of a span's data as stored (span_checksum() of it read back).
    std::uint64_t stored_checksum(const OutputSpan& span, ChunksReadBack* read_back = nullptr) const;
    std::vector<std::int64_t> unit_bounds_, unit_rows_;
    std::vector<std::pair<std::int64_t, std::int64_t>> pending_;  // (unit, checksum) written, not yet recorded
    bool checkpoint_flushes_ = true;
    void prepare_checkpoints();  // after create or reopen
    // Flush, close every dataset, then the file (checked: HDF5 keeps a file with open objects
    // open); `what` names the step in the message of a failure. `sync`: under MPI-IO the
    // flush is also every rank's sync of its writes to the disk.
    void flush_and_close(const char* what, bool sync = true);
};

// The identity recorded in a partial output's journal (journal.hpp), read without opening
// anything else. Error exit 4 when the file cannot be read or has no journal.
std::string read_journal_identity(const std::string& partial_path);

// The identity a complete OUTPUT records in the journal it keeps (journal.hpp); nullopt when it
// has none (an output of an older version). Error exit 4 when the file cannot be read.
std::optional<std::string> read_output_identity(const std::string& output_path);

}  // namespace attnbatch::io
