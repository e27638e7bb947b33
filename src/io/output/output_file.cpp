// Creating and writing the output file (docs/formats.md "Output file").
#include "attnbatch/io/output/output_file.hpp"

#include "attnbatch/io/h5/attribute.hpp"
#include "attnbatch/io/h5/error.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "attnbatch/io/h5/file_paths.hpp"
#include "output/attention_record.hpp"
#include "output/direct_chunks.hpp"
#include "output/output_handles.hpp"
#include "output/reserved_blocks.hpp"
#include "output/write_turns.hpp"
#include "output/writeback.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <stdexcept>
#include <system_error>

namespace attnbatch::io {
namespace {

// What a dataset's storage holds before the run writes there: a marker of unwritten
// sequences (NaN in /lse, -1 in /lengths: see the header), zeros where the run leaves some
// elements unwritten for good (a compressed packed output's maps past a sequence's length), or
// nothing at all where the run writes every element (filling it at allocation would write it
// twice: an uncompressed packed output's maps are written padded, output_spans.cpp).
struct Fill {
    enum Kind { zeros, marker, none } kind = zeros;
    double value = 0.0;  // the marker
};
constexpr Fill kWrittenWhole{Fill::none, 0.0};
Fill marker(double value) { return Fill{Fill::marker, value}; }

// `batch`: the axis that runs along the batch (output_chunk_shape); none for a dataset written
// once, at creation.
Dataset make_dataset(const File& file, const std::string& path, const Datatype& type, const Dims& dims,
                     std::size_t element_size, const OutputLayout& layout, std::optional<BatchAxis> batch,
                     const std::vector<std::string>& labels, Fill fill = {}) {
    DatasetCreation creation;
    creation.chunk = batch ? output_chunk_shape(layout, dims, element_size, *batch)
                           : chunk_shape(dims, element_size, layout.chunk_bytes);
    creation.gzip_level = layout.gzip_level;
    // Uncompressed, the file's layout is then fixed at creation: a resumed run writes the
    // same bytes at the same places as an uninterrupted one, and a crash between flushes
    // cannot leave chunk-index updates half written. Compressed chunks move when written (their
    // size changes), but are allocated at creation too, holding their fill: that is what
    // parallel HDF5 does whatever it is asked, and a file created by one process (--io gather)
    // with chunks still unallocated could not be resumed under --io parallel (HDF5 1.10 read
    // an unallocated chunk to modify it: 'addr overflow', or the ranks hung).
    creation.allocate_early = true;
    if (fill.kind == Fill::marker) {
        creation.has_fill = true;
        creation.fill_value = fill.value;
    }
    // Filters need their fill written (HDF5 refuses H5D_FILL_TIME_NEVER with them).
    creation.fill_never = fill.kind == Fill::none && layout.gzip_level == 0;
    Dataset dataset = Dataset::create(file, path, type, dims, creation);
    set_dimension_labels(dataset, labels);
    return dataset;
}

void write_provenance(const File& file, const OutputLayout& layout, const Provenance& provenance) {
    set_text_attribute(file, attribute::format, format::output);
    set_int_attribute(file, attribute::format_version, 1);
    set_text_attribute(file, attribute::version, provenance.version);
    set_text_attribute(file, attribute::creation_time,
                       provenance.creation_time.empty() ? creation_time_now() : provenance.creation_time);
    set_text_attribute(file, attribute::input_file, provenance.input_file);
    if (!provenance.input_file_absolute.empty()) {
        set_text_attribute(file, attribute::input_file_absolute, provenance.input_file_absolute);
    }
    if (!provenance.weights_file.empty()) {
        set_text_attribute(file, attribute::weights_file, provenance.weights_file);
        set_text_attribute(file, attribute::weights_file_absolute, provenance.weights_file_absolute);
    }
    set_int_attribute(file, attribute::first_sequence, layout.first_sequence);
    set_text_attribute(file, attribute::input_dataset, provenance.input_dataset);
    set_int_attribute(file, attribute::heads, provenance.heads);
    set_int_attribute(file, attribute::kv_heads, provenance.kv_heads > 0 ? provenance.kv_heads : provenance.heads);
    set_int_attribute(file, attribute::d_k, provenance.d_k);
    set_int_attribute(file, attribute::d_v, provenance.d_v);
    write_attention_attributes(file, provenance.attention);
    set_text_attribute(file, attribute::save_weights, name_of(layout.save_weights));
    set_text_attribute(file, attribute::weights_dtype, name_of(layout.weights_dtype));
    set_int_array_attribute(file, attribute::weights_sequences,
                            {layout.first_sequence + layout.weights_first, layout.first_sequence + layout.weights_end()});
    set_int_attribute(file, attribute::ranks, provenance.ranks);
    set_int_attribute(file, attribute::threads, provenance.threads);
    set_text_attribute(file, attribute::io_mode, provenance.io_mode);
    set_text_attribute(file, attribute::config_dataset, dataset::config);
    // Attributes stop near 64 KiB; the configuration may not.
    write_text_dataset(file, dataset::config, provenance.config);
    set_int_attribute(file, attribute::complete, 0);
}

// Both layouts' /attention: its first sequence counts in the input's numbers, as the root's
// first_sequence and weights_sequences do (a packed output once wrote its own row instead).
void set_attention_attributes(const Dataset& attention, const OutputLayout& layout) {
    set_int_attribute(attention, attribute::first_sequence, layout.first_sequence + layout.weights_first);
    set_int_attribute(attention, attribute::mean_over_heads, layout.save_weights == SaveWeights::mean ? 1 : 0);
}

// The netCDF view of the output: one scale per distinct axis, attached to every axis it
// measures. /attention's first axis is N only when it holds every sequence, and its head
// axis H only when it holds every head. A packed output's /output and /lse measure the tokens T
// (and /offsets N+1) where a padded one's measure N and L.
void attach_dimension_scales(const File& file, const OutputLayout& layout, const Dataset& output, const Dataset& lse,
                             const Dataset& lengths, const std::optional<Dataset>& attention,
                             const std::optional<Dataset>& offsets) {
    const auto count = [](std::int64_t value) { return static_cast<hsize_t>(value); };
    const Dataset n = create_dimension_scale(file, dimension::n, count(layout.n));
    const Dataset d_out = create_dimension_scale(file, dimension::d_out, count(layout.d_out));
    const Dataset heads = create_dimension_scale(file, dimension::heads, count(layout.heads));
    // The padded layout's row axis, and in both layouts /attention's query axis.
    std::optional<Dataset> len;
    if (!offsets || attention) len = create_dimension_scale(file, dimension::len, count(layout.len));
    if (offsets) {
        const Dataset tokens = create_dimension_scale(file, dimension::tokens, count(layout.tokens()));
        attach_dimension_scale(output, tokens, 0);
        attach_dimension_scale(output, d_out, 1);
        attach_dimension_scale(lse, heads, 0);
        attach_dimension_scale(lse, tokens, 1);
        attach_dimension_scale(*offsets, create_dimension_scale(file, dimension::offsets, count(layout.n + 1)), 0);
    } else {
        attach_dimension_scale(output, n, 0);
        attach_dimension_scale(output, *len, 1);
        attach_dimension_scale(output, d_out, 2);
        attach_dimension_scale(lse, n, 0);
        attach_dimension_scale(lse, heads, 1);
        attach_dimension_scale(lse, *len, 2);
    }
    attach_dimension_scale(lengths, n, 0);
    if (!attention) return;
    const Dataset len_k = create_dimension_scale(file, dimension::len_k, count(layout.len));
    const bool every_sequence = layout.weights_count() == layout.n;
    const std::optional<Dataset> n_w =
        every_sequence ? std::nullopt : std::optional<Dataset>(create_dimension_scale(file, dimension::n_w, count(layout.weights_count())));
    const bool mean = layout.save_weights == SaveWeights::mean;
    const std::optional<Dataset> head_mean =
        mean ? std::optional<Dataset>(create_dimension_scale(file, dimension::head_mean, 1)) : std::nullopt;
    attach_dimension_scale(*attention, n_w ? *n_w : n, 0);
    attach_dimension_scale(*attention, head_mean ? *head_mean : heads, 1);
    attach_dimension_scale(*attention, *len, 2);
    attach_dimension_scale(*attention, len_k, 3);
}

void expect_pointer(const void* pointer, const char* name, std::int64_t count) {
    if (count > 0 && pointer == nullptr) {
        throw std::invalid_argument(std::string("OutputFile::write_block: ") + name + " is null");
    }
}

}  // namespace

OutputFile::OutputFile() : h5_(std::make_unique<Handles>()) {}
OutputFile::OutputFile(OutputFile&&) noexcept = default;
OutputFile& OutputFile::operator=(OutputFile&&) noexcept = default;
OutputFile::~OutputFile() = default;

File& OutputFile::file() noexcept { return h5_->file; }

std::uint64_t OutputFile::direct_bytes() const noexcept {
    return direct_bytes_closed_ + (direct_output_ ? direct_output_->written() : 0) + (direct_maps_ ? direct_maps_->written() : 0);
}

OutputFile OutputFile::create(const std::string& output_path, const OutputLayout& layout,
                              const Provenance& provenance, const OutputOptions& options) {
    check_output_layout(layout, output_path);
    if (!options.paths_prepared) prepare_output_path(output_path, options.force);
    const std::string partial = partial_path_for(output_path);
    const std::string staging = staging_path_for(output_path);

    OutputFile out;
    out.layout_ = layout;
    out.path_ = output_path;
    out.force_ = options.force;
    out.fsync_ = options.fsync;
    try {
        out.h5_->file = File::create(staging, options.access, output_file_tuning(layout));
        if (layout.packed) {
            out.create_packed(options);
            write_provenance(out.h5_->file, layout, provenance);
            set_text_attribute(out.h5_->file, attribute::sequence_layout, "packed");
            if (options.journal) out.create_journal(*options.journal);
        } else {
            out.create_padded(provenance, options);
        }
        out.prepare_checkpoints();
        // The file's metadata must be in it before it takes the name --resume looks for: closing
        // writes it. The file is then opened again under that name, because HDF5 names a file
        // in its errors by the name it was opened with, and a later failure must name the file
        // the user can resume, not OUTPUT.partial.new. Under MPI-IO the durable mode flushes
        // first, which there is an MPI_File_sync on every rank (--fsync off promises none).
        if (out.mpi_io_ && options.fsync) out.h5_->file.flush();
        out.close_handles();
    } catch (const H5Error& error) {
        out = OutputFile();  // close every handle before removing the file
        ::unlink(staging.c_str());
        throw Error(exit_io, partial + ": cannot create the output: " + error.what());
    }
    // Whole and flushed: now under the name --resume looks for. Under MPI every rank renames;
    // the first one does it and the others find it done (the flush or close before was collective).
    if (::rename(staging.c_str(), partial.c_str()) != 0 && !(errno == ENOENT && path_exists(partial))) {
        const int saved = errno;
        out = OutputFile();
        ::unlink(staging.c_str());
        throw Error(exit_io, partial + ": cannot create the output: cannot rename " + staging + " to it: " +
                                 std::strerror(saved));
    }
    // One rank is enough: the blocks belong to the file, and on a parallel file system every
    // rank asking for the same blocks at once would only queue at its servers. Another rank may
    // be writing already: fallocate fills holes only and leaves written blocks as they are.
    if (options.writer == 0) reserve_blocks(partial);
    try {
        out.h5_->file = File::open(partial, FileMode::read_write, options.access, output_file_tuning(layout));
        out.open_datasets();
        if (options.journal) out.h5_->journal_progress = Dataset::open(out.h5_->file, dataset::journal_progress);
    } catch (const H5Error& error) {
        throw Error(exit_io, partial + ": cannot open the output it created: " + error.what());
    } catch (const std::invalid_argument& error) {
        throw Error(exit_io, partial + ": cannot open the output it created: " + error.what());
    }
    return out;
}

void OutputFile::create_padded(const Provenance& provenance, const OutputOptions& options) {
    const OutputLayout& layout = layout_;
    const auto n = static_cast<hsize_t>(layout.n);
    const auto len = static_cast<hsize_t>(layout.len);
    const auto heads = static_cast<hsize_t>(layout.heads);
    h5_->output = make_dataset(h5_->file, dataset::output, Datatype::float32(), padded_output_dims(layout), 4, layout,
                               BatchAxis{}, {"N", "L", "D"}, kWrittenWhole);
    sequences_per_chunk_ = static_cast<std::int64_t>(h5_->output->chunk()[0]);
    if (layout.save_weights != SaveWeights::none) {
        const bool half = layout.weights_dtype == WeightsDtype::f16;
        h5_->attention = make_dataset(
            h5_->file, dataset::attention, half ? Datatype::float16() : Datatype::float32(), padded_maps_dims(layout),
            layout.weights_element_bytes(), layout, BatchAxis{}, {"N", "H", "L_q", "L_k"}, kWrittenWhole);
        set_attention_attributes(*h5_->attention, layout);
    }
    // NaN and -1 mark sequences not yet written (see the header).
    h5_->lse = make_dataset(h5_->file, dataset::lse, Datatype::float32(), {n, heads, len}, 4, layout, BatchAxis{},
                            {"N", "H", "L"}, marker(std::numeric_limits<double>::quiet_NaN()));
    h5_->lengths =
        make_dataset(h5_->file, dataset::lengths, Datatype::int32(), {n}, 4, layout, BatchAxis{}, {"N"}, marker(-1.0));
    attach_dimension_scales(h5_->file, layout, *h5_->output, *h5_->lse, *h5_->lengths, h5_->attention, std::nullopt);
    write_provenance(h5_->file, layout, provenance);
    if (options.journal) create_journal(*options.journal);
}

void OutputFile::create_packed(const OutputOptions& options) {
    const OutputLayout& layout = layout_;
    const auto n = static_cast<hsize_t>(layout.n);
    const auto tokens = static_cast<hsize_t>(layout.tokens()), heads = static_cast<hsize_t>(layout.heads);
    h5_->output = make_dataset(h5_->file, dataset::output, Datatype::float32(), {tokens, static_cast<hsize_t>(layout.d_out)},
                               4, layout, BatchAxis{0, true}, {"T", "D"}, kWrittenWhole);
    sequences_per_chunk_ = 1;
    if (layout.save_weights != SaveWeights::none) {
        const bool half = layout.weights_dtype == WeightsDtype::f16;
        h5_->attention = make_dataset(
            h5_->file, dataset::attention, half ? Datatype::float16() : Datatype::float32(),
            padded_maps_dims(layout), layout.weights_element_bytes(), layout, BatchAxis{}, {"N", "H", "L_q", "L_k"},
            layout.gzip_level == 0 ? kWrittenWhole : Fill{});
        set_attention_attributes(*h5_->attention, layout);
    }
    h5_->lse = make_dataset(h5_->file, dataset::lse, Datatype::float32(), {heads, tokens}, 4, layout,
                            BatchAxis{1, true}, {"H", "T"}, marker(std::numeric_limits<double>::quiet_NaN()));
    h5_->lengths =
        make_dataset(h5_->file, dataset::lengths, Datatype::int32(), {n}, 4, layout, BatchAxis{}, {"N"}, marker(-1.0));
    h5_->offsets = make_dataset(h5_->file, dataset::offsets, Datatype::int64(), {n + 1}, 8, layout, std::nullopt, {"N+1"});
    attach_dimension_scales(h5_->file, layout, *h5_->output, *h5_->lse, *h5_->lengths, h5_->attention, h5_->offsets);
    // Each writer its own rows: a collective creation by thousands of ranks writes them once.
    // Compressed under MPI-IO, in one collective write (data_transfer()).
    const auto total = static_cast<std::uint64_t>(n + 1);
    const auto writers = static_cast<std::uint64_t>(std::max(1, options.writers));
    const auto writer = static_cast<std::uint64_t>(std::clamp(options.writer, 0, options.writers - 1));
    const std::uint64_t begin = total * writer / writers, end = total * (writer + 1) / writers;
    write_rows(*h5_->offsets, begin, end - begin, layout.offsets->data() + begin, static_cast<std::size_t>(end - begin),
               data_transfer());
}

Transfer OutputFile::data_transfer() const {
    // HDF5 refuses the other way: "Can't perform independent write with filters in pipeline".
    return layout_.gzip_level != 0 && h5_->file.uses_mpi_io() ? Transfer::collective : Transfer::independent;
}

namespace {

// Maps are written and hashed in pieces of about this many bytes (whole journal units, at
// least one), so that the hash reads a piece while the write's copy has left it in the cache.
// A step's maps are tens of MiB: hashed after one write of them all, they came back from memory.
constexpr std::size_t kHashedPieceBytes = std::size_t{2} << 20;

}  // namespace

void OutputFile::write_block(std::int64_t first, std::int64_t last, const OutputBlock& block, Transfer transfer) {
    if (!h5_->file.is_open()) throw std::logic_error("OutputFile::write_block after close");
    if (first < 0 || first > last || last > layout_.n) {
        throw std::invalid_argument("OutputFile::write_block: sequences [" + std::to_string(first) + ", " +
                                    std::to_string(last) + ") outside [0, " + std::to_string(layout_.n) + ")");
    }
    const std::int64_t count = last - first;
    const auto [maps_begin, maps_end] = layout_.weights_range(first, last);
    expect_pointer(block.output, "output", count);
    expect_pointer(block.lse, "lse", count);
    expect_pointer(block.lengths, "lengths", count);
    if (h5_->attention) {
        if (layout_.weights_dtype == WeightsDtype::f16) expect_pointer(block.attention_f16, "attention_f16", maps_end - maps_begin);
        else expect_pointer(block.attention_f32, "attention_f32", maps_end - maps_begin);
    }
    const auto rows = [](std::int64_t value) { return static_cast<hsize_t>(value); };
    const auto size = [](std::int64_t value) { return static_cast<std::size_t>(value); };
    const std::size_t len = size(layout_.len);
    // Collective writes need one call per dataset on every rank, so the maps go in pieces only
    // when independent.
    const bool maps_in_pieces = h5_->attention && h5_->journal_progress && transfer == Transfer::independent &&
                                maps_end > maps_begin;
    // HDF5's errors and those of the writes around it (direct_chunks.hpp) say the same to the user.
    const auto cannot_write = [&](const std::string& what, std::int64_t begin, std::int64_t end, const std::exception& error) {
        return Error(exit_io, partial_path() + ": cannot write " + what + "sequences [" + std::to_string(begin) + ", " +
                                  std::to_string(end) + "): " + error.what());
    };
    try {
        const std::size_t row = len * size(layout_.d_out);
        write_chunked_rows(direct_output_, h5_->output, rows(first), rows(count), row, block.output, transfer);
        // Called even when empty: collective writes need every rank.
        if (h5_->attention && !maps_in_pieces) write_maps(maps_begin, first, last, block, transfer);
        const WriteTurns::Turn turn(write_turns(transfer));
        write_rows(*h5_->lse, rows(first), rows(count), block.lse, size(count) * size(layout_.heads) * len, transfer);
        write_rows(*h5_->lengths, rows(first), rows(count), block.lengths, size(count), transfer);
    } catch (const H5Error& error) {
        throw cannot_write("", first, last, error);
    } catch (const std::system_error& error) {
        throw cannot_write("", first, last, error);
    }
    if (!h5_->journal_progress) return;
    if (!maps_in_pieces) return remember_checksums(first, first, last, block);
    const std::size_t map_bytes = size(layout_.weights_heads()) * len * len * layout_.weights_element_bytes();
    const auto piece_bytes = [&](std::int64_t begin, std::int64_t end) {
        const auto [piece_begin, piece_end] = layout_.weights_range(begin, end);
        return size(piece_end - piece_begin) * map_bytes;
    };
    // A piece ends on a chunk bound of the maps where a unit bound within twice the piece size
    // falls on one, so that the pieces after a block's first are whole chunks (which go around
    // HDF5, write_chunked_rows) rather than each losing a part of a chunk at either end.
    const Dims maps_chunk = h5_->attention->chunk();
    const std::int64_t maps_per_chunk = maps_chunk.empty() ? 1 : static_cast<std::int64_t>(maps_chunk[0]);
    const auto on_chunk_bound = [&](std::int64_t end) {
        return (layout_.weights_range(first, end).second - layout_.weights_first) % maps_per_chunk == 0;
    };
    for (std::int64_t begin = first, end = first; begin < last; begin = end) {
        do {  // to the next unit bound (every sequence of a whole block is in whole units)
            const auto next = std::upper_bound(unit_bounds_.begin(), unit_bounds_.end(), end);
            end = next == unit_bounds_.end() ? last : std::min(last, *next);
        } while (end < last && (piece_bytes(begin, end) < kHashedPieceBytes ||
                                (!on_chunk_bound(end) && piece_bytes(begin, end) < 2 * kHashedPieceBytes)));
        try {
            write_maps(maps_begin, begin, end, block, transfer);
        } catch (const H5Error& error) {
            throw cannot_write("the attention maps of ", begin, end, error);
        } catch (const std::system_error& error) {
            throw cannot_write("the attention maps of ", begin, end, error);
        }
        remember_checksums(first, begin, end, block);
    }
}

void OutputFile::write_maps(std::int64_t block_maps_first, std::int64_t first, std::int64_t last, const OutputBlock& block,
                            Transfer transfer) {
    const auto [maps_begin, maps_end] = layout_.weights_range(first, last);
    const std::int64_t maps_count = maps_end - maps_begin;
    const auto len = static_cast<std::size_t>(layout_.len);
    const std::size_t row = static_cast<std::size_t>(layout_.weights_heads()) * len * len;
    const std::size_t skip = maps_count > 0 ? static_cast<std::size_t>(maps_begin - block_maps_first) * row : 0;
    const hsize_t offset = maps_count > 0 ? static_cast<hsize_t>(maps_begin - layout_.weights_first) : 0;
    const bool half = layout_.weights_dtype == WeightsDtype::f16;
    if (half) {
        write_chunked_rows(direct_maps_, h5_->attention, offset, static_cast<hsize_t>(maps_count), row, block.attention_f16 + skip,
                           transfer);
    } else {
        write_chunked_rows(direct_maps_, h5_->attention, offset, static_cast<hsize_t>(maps_count), row, block.attention_f32 + skip,
                           transfer);
    }
}

template <class T>
void OutputFile::write_chunked_rows(std::unique_ptr<DirectChunks>& slot, const std::optional<Dataset>& dataset,
                                    std::uint64_t first, std::uint64_t count, std::size_t row, const T* data, Transfer transfer) {
    const auto [begin, end] = write_whole_chunks(slot, dataset, first * row, count * row, data, transfer);
    if (begin == end) {  // called even when empty: collective writes need every rank
        const WriteTurns::Turn turn(write_turns(transfer));
        write_rows(*dataset, first, count, data, count * row, transfer);
        return;
    }
    // Chunk bounds are row bounds: a chunk holds whole rows, or a row holds whole chunks (and
    // then every run of rows is whole chunks).
    if (begin % row != 0 || end % row != 0) throw std::logic_error("write_chunked_rows: a chunk bound inside a row");
    const std::uint64_t head_end = begin / row, tail_begin = end / row, last = first + count;
    if (head_end == first && tail_begin == last) return;  // all of it whole chunks: no turn to wait for
    const WriteTurns::Turn turn(write_turns(transfer));
    if (head_end > first) write_rows(*dataset, first, head_end - first, data, (head_end - first) * row, transfer);
    if (last > tail_begin) {
        write_rows(*dataset, tail_begin, last - tail_begin, data + (tail_begin - first) * row, (last - tail_begin) * row, transfer);
    }
}

// output_spans.cpp writes a packed /output's rows with it too.
template void OutputFile::write_chunked_rows<float>(std::unique_ptr<DirectChunks>&, const std::optional<Dataset>&, std::uint64_t,
                                                    std::uint64_t, std::size_t, const float*, Transfer);

std::pair<std::uint64_t, std::uint64_t> OutputFile::write_whole_chunks(std::unique_ptr<DirectChunks>& slot,
                                                                       const std::optional<Dataset>& dataset,
                                                                       std::uint64_t first, std::uint64_t count,
                                                                       const void* data, Transfer transfer) {
    const std::pair<std::uint64_t, std::uint64_t> none{first, first};
    DirectChunks* chunks = count > 0 ? direct_chunks(slot, dataset, transfer) : nullptr;
    if (chunks == nullptr) return none;
    const auto [begin, end] = chunks->whole_chunks(first, count);
    if (begin == end) return none;
    const void* inner = static_cast<const char*>(data) + (begin - first) * chunks->element_size();
    if (fsync_) return chunks->write(begin, end - begin, inner, WritePath::direct) ? std::pair{begin, end} : none;
    const std::vector<DirectChunks::Run> runs = chunks->plan(begin, end - begin, inner);
    if (runs.empty()) return none;
    if (!write_path_) write_path_ = std::make_unique<WritePathChoice>();
    const auto timed_write = [&](std::size_t from, std::size_t to, WritePath path, bool while_computing) {
        const auto start = std::chrono::steady_clock::now();
        {
            // Buffered writers of one file take turns in the kernel anyway (write_turns.hpp);
            // direct overwrites of placed chunks do not.
            const WriteTurns::Turn turn(path == WritePath::page_cache ? write_turns(transfer) : nullptr);
            chunks->write(runs, from, to, path);
        }
        const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
        write_path_->record(path, to - from, seconds.count(), while_computing);
    };
    std::size_t bytes = 0;
    for (const DirectChunks::Run& run : runs) bytes += run.bytes;
    // Whole chunks, at least one, of about `target` bytes (WritePathChoice's sizes).
    const auto whole_chunks_of = [chunk = chunks->chunk_bytes()](std::uint64_t target) {
        return std::max<std::size_t>(1, static_cast<std::size_t>(target) / chunk) * chunk;
    };
    std::size_t done = 0;
    // Past the page cache while the compute runs, a piece at a time (write_path_choice.hpp).
    const std::size_t piece = whole_chunks_of(WritePathChoice::kComputingPiece);
    while (done < bytes && computing_ != nullptr && computing_->load(std::memory_order_relaxed)) {
        const std::size_t to = std::min(bytes, done + piece);
        timed_write(done, to, WritePath::direct, true);
        done = to;
    }
    const std::size_t tried = std::min(bytes - done, whole_chunks_of(WritePathChoice::kTryBytes));
    if (done < bytes && write_path_->try_other(tried)) {
        timed_write(done, done + tried, write_path_->other(), false);
        done += tried;
    }
    if (done < bytes) timed_write(done, bytes, write_path_->usual(), false);
    return {begin, end};
}

DirectChunks* OutputFile::direct_chunks(std::unique_ptr<DirectChunks>& slot, const std::optional<Dataset>& dataset,
                                        Transfer transfer) {
    // HDF5 holds no chunk of the file that these writes could leave stale: MPI-IO caches none,
    // and create() and reopen() open an uncompressed output without a chunk cache
    // (output_file_tuning); a compressed one has filters, which DirectChunks declines.
    if (transfer != Transfer::independent || !dataset) return nullptr;
    if (!slot) slot = std::make_unique<DirectChunks>(partial_path(), *dataset);
    return slot->usable() ? slot.get() : nullptr;
}

const WriteTurns* OutputFile::write_turns(Transfer transfer) {
    if (transfer != Transfer::independent || !mpi_io_) return nullptr;
    if (!write_turns_) write_turns_ = std::make_unique<WriteTurns>(partial_path());
    return write_turns_.get();
}

void OutputFile::flush() {
    try {
        h5_->file.flush();
    } catch (const H5Error& error) {
        throw Error(exit_io, partial_path() + ": cannot flush the output: " + error.what());
    }
}

void OutputFile::close_handles() {
    for (std::optional<Dataset>* dataset :
         {&h5_->output, &h5_->attention, &h5_->lse, &h5_->lengths, &h5_->offsets, &h5_->journal_progress}) {
        if (*dataset) (*dataset)->close();
    }
    h5_->file.close();
}

void OutputFile::flush_and_close(const char* what, bool sync) {
    writeback_.reset();
    direct_bytes_closed_ = direct_bytes();
    direct_output_.reset();
    direct_maps_.reset();
    try {
        // Under MPI-IO a flush is MPI_File_sync on every rank; closing writes the same
        // metadata without it.
        if (sync || !mpi_io_) h5_->file.flush();
        close_handles();
    } catch (const H5Error& error) {
        throw Error(exit_io, partial_path() + ": cannot " + what + " the output: " + error.what());
    }
}

void OutputFile::close_complete() {
    try {
        set_int_attribute(h5_->file, attribute::complete, 1);
    } catch (const H5Error& error) {
        throw Error(exit_io, partial_path() + ": cannot complete the output: " + error.what());
    }
    flush_and_close("complete", fsync_);
}

void OutputFile::close_incomplete() { flush_and_close("close"); }

void OutputFile::finalize() {
    close_complete();
    publish_output(path_, force_, fsync_);
}

}  // namespace attnbatch::io
