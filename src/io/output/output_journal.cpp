// OutputFile's journal: creating it, recording units as done at checkpoints, reopening a
// partial output for --resume and re-checking what it says is done (journal.hpp).
#include "attnbatch/io/output/fault_injection.hpp"
#include "attnbatch/io/h5/attribute.hpp"
#include "attnbatch/io/h5/chunk_repair.hpp"
#include "attnbatch/io/output/journal.hpp"
#include "attnbatch/io/output/output_file.hpp"
#include "attnbatch/io/output/output_reader.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "output/output_handles.hpp"
#include "h5/check.hpp"
#include "h5/transfer_list.hpp"
#include "output/writeback.hpp"

#include <algorithm>
#include <stdexcept>

namespace attnbatch::io {
namespace {

// Positions (bounds[u], rows[u]) rise strictly from (0, 0) to (N, 0).
void check_plan(const JournalPlan& plan, std::int64_t n) {
    const std::vector<std::int64_t>& b = plan.unit_bounds;
    const std::vector<std::int64_t>& r = plan.unit_rows;
    const auto row = [&](std::size_t i) { return r.empty() ? 0 : r[i]; };
    bool valid = b.size() >= 2 && b.front() == 0 && b.back() == n && (r.empty() || r.size() == b.size()) &&
                 row(0) == 0 && row(b.size() - 1) == 0;
    for (std::size_t i = 1; valid && i < b.size(); ++i) {
        valid = row(i) >= 0 && (b[i] > b[i - 1] || (b[i] == b[i - 1] && row(i) > row(i - 1)));
    }
    if (!valid) throw std::invalid_argument("OutputFile: journal unit positions must rise strictly from (0, 0) to (N, 0)");
}

// The rows of `progress` for `rows` (unit, checksum), as a union of hyperslabs: one H5Dwrite
// whatever their number (collective writes need the same number of calls on every rank).
void write_progress_rows(const Dataset& progress, std::vector<std::pair<std::int64_t, std::int64_t>>& rows,
                         Transfer transfer) {
    const Where& where = progress.where();
    const std::size_t count = rows.size();
    std::sort(rows.begin(), rows.end());
    std::vector<std::int64_t> values;
    values.reserve(2 * count);
    for (const auto& [unit, checksum] : rows) {
        values.push_back(1);
        values.push_back(checksum);
    }
    const DataspaceHandle file_space(H5_CALL(H5Dget_space, where, progress.id()));
    H5_CALL(H5Sselect_none, where, file_space.id());
    for (std::size_t i = 0; i < count;) {
        std::size_t j = i + 1;
        while (j < count && rows[j].first == rows[j - 1].first + 1) ++j;
        const hsize_t start[2] = {static_cast<hsize_t>(rows[i].first), 0};
        const hsize_t extent[2] = {static_cast<hsize_t>(j - i), 2};
        H5_CALL(H5Sselect_hyperslab, where, file_space.id(), H5S_SELECT_OR, start, nullptr, extent, nullptr);
        i = j;
    }
    const hsize_t memory_dims[2] = {std::max<hsize_t>(count, 1), 2};
    const DataspaceHandle memory_space(H5_CALL(H5Screate_simple, where, 2, memory_dims, nullptr));
    if (count == 0) H5_CALL(H5Sselect_none, where, memory_space.id());
    const std::int64_t none[2] = {0, 0};
    H5_CALL(H5Dwrite, where, progress.id(), H5T_NATIVE_INT64, memory_space.id(), file_space.id(), detail::transfer_list(transfer),
            count ? values.data() : none);
}

Error cannot_continue(const std::string& partial, const std::string& why) {
    return Error(exit_io, partial + ": cannot continue the partial output: " + why +
                                    "; hint: run with --force instead of --resume to discard it and start afresh");
}

}  // namespace

void OutputFile::create_journal(const JournalPlan& plan) {
    check_plan(plan, layout_.n);
    const auto units = static_cast<hsize_t>(plan.unit_bounds.size() - 1);
    Group::create(h5_->file, dataset::journal);  // explicitly, for its creation properties
    DatasetCreation early;
    early.allocate_early = true;
    Dataset bounds = Dataset::create(h5_->file, dataset::journal_unit_bounds, Datatype::int64(), {units + 1}, early);
    write_rows(bounds, 0, units + 1, plan.unit_bounds.data(), plan.unit_bounds.size());
    h5_->journal_progress = Dataset::create(h5_->file, dataset::journal_progress, Datatype::int64(), {units, 2}, early);
    write_text_dataset(h5_->file, dataset::journal_identity, plan.identity);
    set_text_attribute(Dataset::open(h5_->file, dataset::journal_identity), attribute::hash, hash_text(plan.identity));
    // Only when some unit is a piece: a journal of whole units is byte for byte what it was.
    if (!plan.unit_rows.empty()) {
        Dataset rows = Dataset::create(h5_->file, dataset::journal_unit_rows, Datatype::int64(), {units + 1}, early);
        write_rows(rows, 0, units + 1, plan.unit_rows.data(), plan.unit_rows.size());
    }
    unit_bounds_ = plan.unit_bounds;
    unit_rows_ = plan.unit_rows;
}

void OutputFile::open_journal() {
    h5_->journal_progress = Dataset::open(h5_->file, dataset::journal_progress);
    unit_bounds_ = read_all<std::int64_t>(Dataset::open(h5_->file, dataset::journal_unit_bounds));
    unit_rows_.clear();
    if (object_kind(h5_->file, dataset::journal_unit_rows) == ObjectKind::dataset) {
        unit_rows_ = read_all<std::int64_t>(Dataset::open(h5_->file, dataset::journal_unit_rows));
    }
    check_plan(JournalPlan{unit_bounds_, {}, unit_rows_}, layout_.n);
    const Dims dims = h5_->journal_progress->dims();
    if (dims.size() != 2 || dims[0] + 1 != unit_bounds_.size() || dims[1] != 2) {
        throw std::invalid_argument(dataset::journal_progress + std::string(" has shape ") + shape_text(dims) + ", expected [" +
                                    std::to_string(unit_bounds_.size() - 1) + ", 2]");
    }
}

void OutputFile::open_datasets() {
    const OutputLayout& layout = layout_;
    const auto expect = [&](Dataset dataset, const Dims& dims) {
        if (dataset.dims() != dims) {
            throw std::invalid_argument(dataset.path() + " has shape " + shape_text(dataset.dims()) + ", expected " +
                                        shape_text(dims));
        }
        return dataset;
    };
    const auto n = static_cast<hsize_t>(layout.n), len = static_cast<hsize_t>(layout.len);
    const auto tokens = static_cast<hsize_t>(layout.tokens()), d_out = static_cast<hsize_t>(layout.d_out);
    if (layout.packed) {
        h5_->output = expect(Dataset::open(h5_->file, dataset::output), {tokens, d_out});
        h5_->offsets = expect(Dataset::open(h5_->file, dataset::offsets), {n + 1});
    } else {
        h5_->output = expect(Dataset::open(h5_->file, dataset::output), {n, len, d_out});
    }
    sequences_per_chunk_ = layout.packed || h5_->output->chunk().empty() ? 1 : static_cast<std::int64_t>(h5_->output->chunk()[0]);
    if (layout.save_weights != SaveWeights::none) {
        h5_->attention = expect(Dataset::open(h5_->file, dataset::attention),
                                {static_cast<hsize_t>(layout.weights_count()), static_cast<hsize_t>(layout.weights_heads()), len, len});
    }
    const auto heads = static_cast<hsize_t>(layout.heads);
    h5_->lse = expect(Dataset::open(h5_->file, dataset::lse), layout.packed ? Dims{heads, tokens} : Dims{n, heads, len});
    h5_->lengths = expect(Dataset::open(h5_->file, dataset::lengths), {n});
}

OutputFile OutputFile::reopen(const std::string& output_path, const OutputLayout& layout, const FileAccess& access,
                              FileMode mode) {
    OutputFile out;
    out.layout_ = layout;
    out.path_ = output_path;
    const std::string partial = partial_path_for(output_path);
    try {
        out.h5_->file = File::open(partial, mode, access, output_file_tuning(layout));
        out.open_datasets();
        out.open_journal();
        out.prepare_checkpoints();
    } catch (const H5Error& error) {
        throw cannot_continue(partial, error.what());
    } catch (const std::invalid_argument& error) {  // a shape that is not the layout's
        throw cannot_continue(partial, error.what());
    }
    return out;
}

void OutputFile::remember_checksums(std::int64_t block_first, std::int64_t first, std::int64_t last,
                                    const OutputBlock& block) {
    if (first == last) return;
    const auto unit = std::lower_bound(unit_bounds_.begin(), unit_bounds_.end(), first);
    const auto end = std::lower_bound(unit_bounds_.begin(), unit_bounds_.end(), last);
    const auto whole = [&](std::vector<std::int64_t>::const_iterator at) {
        return unit_rows_.empty() || unit_rows_[static_cast<std::size_t>(at - unit_bounds_.begin())] == 0;
    };
    if (unit == unit_bounds_.end() || *unit != first || end == unit_bounds_.end() || *end != last || !whole(unit) ||
        !whole(end)) {
        throw std::logic_error("OutputFile::write_block: sequences [" + std::to_string(first) + ", " +
                               std::to_string(last) + ") are not whole journal units");
    }
    for (auto u = unit; u != end; ++u) {
        pending_.emplace_back(u - unit_bounds_.begin(),
                              static_cast<std::int64_t>(unit_checksum(layout_, *u, *(u + 1), block_first, block)));
    }
}

void OutputFile::prepare_checkpoints() {
    mpi_io_ = h5_->file.uses_mpi_io();
    checkpoint_flushes_ = layout_.gzip_level != 0 || !mpi_io_;
}

void OutputFile::checkpoint(Transfer transfer) {
    fault_point("before_flush");
    if (checkpoint_flushes_) flush();
    if (h5_->journal_progress) {
        fault_point("after_flush");
        try {
            write_progress_rows(*h5_->journal_progress, pending_, transfer);
        } catch (const H5Error& error) {
            throw Error(exit_io, partial_path() + ": cannot record progress: " + error.what());
        }
        pending_.clear();
        if (checkpoint_flushes_) flush();
    }
    // The rows written so far start on their way to the disk while the next round computes:
    // left to the fsync before publication, 640 MiB took 0.2 s there, after the last compute.
    // Without fsync the kernel writes them when it will, and the page cache is the limit.
    if (!fsync_) return;
    if (!writeback_) writeback_ = std::make_unique<Writeback>(partial_path());
    writeback_->start();
}

std::string read_journal_identity(const std::string& partial_path) {
    try {
        const File file = File::open(partial_path, FileMode::read_only);
        return read_text_dataset(file, dataset::journal_identity);
    } catch (const H5Error& error) {
        throw Error(exit_io, partial_path + ": cannot read its progress journal (" + dataset::journal_identity + "): " +
                                       error.what() + "; hint: run with --force instead of --resume to discard it and start afresh");
    }
}

std::optional<std::string> read_output_identity(const std::string& output_path) {
    try {
        const File file = File::open(output_path, FileMode::read_only);
        if (object_kind(file, dataset::journal_identity) != ObjectKind::dataset) return std::nullopt;
        return read_text_dataset(file, dataset::journal_identity);
    } catch (const H5Error& error) {
        throw Error(exit_io, output_path + ": cannot read the identity of the run that wrote it (" +
                                 dataset::journal_identity + "): " + error.what());
    }
}

std::map<std::string, std::string> OutputFile::recorded_options() const {
    try {
        return parse_recorded_options(read_text_dataset(h5_->file, dataset::config));
    } catch (const H5Error& error) {
        throw Error(exit_io, partial_path() + ": cannot read its recorded configuration (" + dataset::config + "): " +
                                 error.what());
    }
}

JournalState OutputFile::journal_state() const {
    JournalState state;
    state.plan.unit_bounds = unit_bounds_;
    state.plan.unit_rows = unit_rows_;
    try {
        state.plan.identity = read_text_dataset(h5_->file, dataset::journal_identity);
        const std::vector<std::int64_t> progress = read_all<std::int64_t>(*h5_->journal_progress);
        state.done.resize(progress.size() / 2);
        state.checksums.resize(progress.size() / 2);
        for (std::size_t u = 0; u < state.done.size(); ++u) {
            state.done[u] = progress[2 * u] != 0;
            state.checksums[u] = progress[2 * u + 1];
        }
    } catch (const H5Error& error) {
        throw Error(exit_io, partial_path() + ": cannot read the progress journal: " + error.what() +
                                       "; hint: run with --force instead of --resume to discard it and start afresh");
    }
    return state;
}

std::size_t OutputFile::reset_unreadable_chunks(const ChunksReadBack& read_back) {
    std::size_t replaced = 0;
    const ChunkIndices none;
    const std::pair<const std::optional<Dataset>*, const ChunkIndices*> datasets[] = {
        {&h5_->output, &read_back.output}, {&h5_->attention, &read_back.attention}, {&h5_->lse, &read_back.lse},
        {&h5_->lengths, &read_back.lengths}, {&h5_->offsets, &none}};
    for (const auto& [dataset, read] : datasets) {
        if (!*dataset) continue;
        try {
            replaced += io::reset_unreadable_chunks(**dataset, *read);
        } catch (const H5Error& error) {
            throw Error(exit_io, partial_path() + ": cannot replace its unreadable chunks: " + error.what() +
                                     "; hint: run with --force instead of --resume to discard it and start afresh");
        }
    }
    return replaced;
}

std::vector<std::int64_t> OutputFile::units_failing_checksum(const JournalState& state, std::size_t first_unit,
                                                             std::size_t last_unit, ChunksReadBack* read_back) const {
    std::vector<std::int64_t> failing;
    std::vector<float> output, lse, attention_f32;
    std::vector<std::int32_t> lengths;
    std::vector<std::uint16_t> attention_f16;
    const auto size = [](std::int64_t v) { return static_cast<std::size_t>(v); };
    const auto rows = [](std::int64_t v) { return static_cast<hsize_t>(v); };
    const std::size_t len = size(layout_.len);
    for (std::size_t u = first_unit; u < std::min(last_unit, state.done.size()); ++u) {
        if (!state.done[u]) continue;
        const OutputSpan span = unit_span(u);
        if (layout_.packed || span.piece()) {
            try {
                if (static_cast<std::int64_t>(stored_checksum(span, read_back)) != state.checksums[u]) {
                    failing.push_back(static_cast<std::int64_t>(u));
                }
            } catch (const H5Error&) {
                failing.push_back(static_cast<std::int64_t>(u));
            }
            continue;
        }
        const std::int64_t first = unit_bounds_[u], last = unit_bounds_[u + 1], count = last - first;
        try {
            output.resize(size(count) * len * size(layout_.d_out));
            lse.resize(size(count) * size(layout_.heads) * len);
            lengths.resize(size(count));
            read_rows(*h5_->output, rows(first), rows(count), output.data(), output.size());
            read_rows(*h5_->lse, rows(first), rows(count), lse.data(), lse.size());
            read_rows(*h5_->lengths, rows(first), rows(count), lengths.data(), lengths.size());
            OutputBlock block{output.data(), lse.data(), lengths.data(), nullptr, nullptr};
            const auto [begin, end] = layout_.weights_range(first, last);
            if (end > begin) {
                const std::size_t elements = size(end - begin) * size(layout_.weights_heads()) * len * len;
                const hsize_t offset = rows(begin - layout_.weights_first);
                if (layout_.weights_dtype == WeightsDtype::f16) {
                    attention_f16.resize(elements);
                    read_rows(*h5_->attention, offset, rows(end - begin), attention_f16.data(), elements);
                    block.attention_f16 = attention_f16.data();
                } else {
                    attention_f32.resize(elements);
                    read_rows(*h5_->attention, offset, rows(end - begin), attention_f32.data(), elements);
                    block.attention_f32 = attention_f32.data();
                }
            }
            if (static_cast<std::int64_t>(unit_checksum(layout_, first, last, first, block)) != state.checksums[u]) {
                failing.push_back(static_cast<std::int64_t>(u));
            }
            if (read_back) {
                const auto note_rows = [&](const Dataset& dataset, hsize_t from, hsize_t rows_read, ChunkIndices& chunks) {
                    note_chunks_read(dataset, {rows_slab(dataset, from, rows_read)}, chunks);
                };
                note_rows(*h5_->output, rows(first), rows(count), read_back->output);
                note_rows(*h5_->lse, rows(first), rows(count), read_back->lse);
                note_rows(*h5_->lengths, rows(first), rows(count), read_back->lengths);
                if (end > begin) note_rows(*h5_->attention, rows(begin - layout_.weights_first), rows(end - begin), read_back->attention);
            }
        } catch (const H5Error&) {
            failing.push_back(static_cast<std::int64_t>(u));  // unreadable data is redone too
        }
    }
    return failing;
}

}  // namespace attnbatch::io
