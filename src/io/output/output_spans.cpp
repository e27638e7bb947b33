// Spans of the output: pieces of a sequence (any layout) and whole sequences of the packed
// layout, written, checksummed and read back in the canonical layout of output_file.hpp's
// OutputBlock. Padded whole sequences keep write_block() and unit_checksum().
#include "attnbatch/io/output/journal.hpp"
#include "attnbatch/io/output/output_file.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "output/direct_chunks.hpp"
#include "output/output_handles.hpp"
#include "output/write_turns.hpp"

#include "output/xxh3.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>

namespace attnbatch::io {
namespace {

std::string span_text(const OutputSpan& span) {
    if (!span.piece()) return "sequences [" + std::to_string(span.first) + ", " + std::to_string(span.last) + ")";
    return "rows [" + std::to_string(span.row_first) + ", " + std::to_string(span.row_last) + ") of sequence " +
           std::to_string(span.first);
}

void check_span(const OutputLayout& layout, const OutputSpan& span) {
    bool valid = span.first >= 0 && span.first <= span.last && span.last <= layout.n;
    if (valid && span.piece()) {
        valid = span.last == span.first + 1 && span.row_first >= 0 && span.row_first < span.row_last &&
                span.row_last <= layout.rows_of(span.first);
    }
    if (!valid) throw std::invalid_argument("OutputFile: " + span_text(span) + " is not a span of this output");
}

// The first row of sequence s in /output (packed) or 0.
std::int64_t row_of(const OutputLayout& layout, std::int64_t s) {
    return layout.packed ? (*layout.offsets)[static_cast<std::size_t>(s)] : 0;
}

// Rows the span holds in total.
std::int64_t span_rows(const OutputLayout& layout, const OutputSpan& span) {
    if (span.piece()) return span.row_last - span.row_first;
    if (layout.packed) return row_of(layout, span.last) - row_of(layout, span.first);
    return (span.last - span.first) * layout.len;
}

// Rows of the sequences with stored attention maps in the span.
std::int64_t map_rows(const OutputLayout& layout, const OutputSpan& span) {
    const auto [begin, end] = layout.weights_range(span.first, span.last);
    if (end <= begin) return 0;
    if (span.piece()) return span.row_last - span.row_first;
    return span_rows(layout, OutputSpan{begin, end, 0, 0});
}

struct Boxes {
    std::vector<Slab> output, lse, lengths, attention;
};

Boxes boxes_of(const OutputLayout& layout, const OutputSpan& span) {
    Boxes boxes;
    const auto h = [](std::int64_t v) { return static_cast<hsize_t>(v); };
    const hsize_t d_out = h(layout.d_out), heads = h(layout.heads), len = h(layout.len);
    const hsize_t map_heads = h(layout.weights_heads());
    const std::int64_t rows = span_rows(layout, span);
    if (layout.packed) {
        const std::int64_t t0 = row_of(layout, span.first) + (span.piece() ? span.row_first : 0);
        boxes.output.push_back(Slab{{h(t0), 0}, {h(rows), d_out}});
        boxes.lse.push_back(Slab{{0, h(t0)}, {heads, h(rows)}});
    } else if (span.piece()) {
        boxes.output.push_back(Slab{{h(span.first), h(span.row_first), 0}, {1, h(rows), d_out}});
        boxes.lse.push_back(Slab{{h(span.first), 0, h(span.row_first)}, {1, heads, h(rows)}});
    } else {
        boxes.output.push_back(Slab{{h(span.first), 0, 0}, {h(span.last - span.first), len, d_out}});
        boxes.lse.push_back(Slab{{h(span.first), 0, 0}, {h(span.last - span.first), heads, len}});
    }
    if (!span.piece()) {
        boxes.lengths.push_back(Slab{{h(span.first)}, {h(span.last - span.first)}});
    } else if (span.row_last == layout.rows_of(span.first)) {
        boxes.lengths.push_back(Slab{{h(span.first)}, {1}});
    }
    const auto [begin, end] = layout.weights_range(span.first, span.last);
    for (std::int64_t s = begin; s < end; ++s) {
        const hsize_t map = h(s - layout.weights_first);
        if (span.piece()) {
            boxes.attention.push_back(Slab{{map, 0, h(span.row_first), 0}, {1, map_heads, h(rows), len}});
        } else if (layout.packed) {
            boxes.attention.push_back(Slab{{map, 0, 0, 0}, {1, map_heads, h(layout.rows_of(s)), len}});
        } else {
            boxes.attention.push_back(Slab{{map, 0, 0, 0}, {h(end - begin), map_heads, len, len}});
            break;
        }
    }
    return boxes;
}

}  // namespace

SpanSizes span_sizes(const OutputLayout& layout, const OutputSpan& span) {
    check_span(layout, span);
    const auto z = [](std::int64_t v) { return static_cast<std::size_t>(v); };
    const std::int64_t rows = span_rows(layout, span);
    SpanSizes sizes;
    sizes.output = z(rows) * z(layout.d_out);
    sizes.lse = z(rows) * z(layout.heads);
    sizes.lengths = span.piece() ? (span.row_last == layout.rows_of(span.first) ? 1 : 0) : z(span.last - span.first);
    sizes.attention = layout.save_weights == SaveWeights::none
                          ? 0
                          : z(map_rows(layout, span)) * z(layout.weights_heads()) * z(layout.len);
    return sizes;
}

std::uint64_t span_checksum(const OutputLayout& layout, const OutputSpan& unit, const OutputSpan& block_span,
                            const OutputBlock& block) {
    const auto z = [](std::int64_t v) { return static_cast<std::size_t>(v); };
    if (unit.first < block_span.first || unit.last > block_span.last || unit.piece() != block_span.piece() ||
        (unit.piece() && (unit.row_first < block_span.row_first || unit.row_last > block_span.row_last))) {
        throw std::invalid_argument("span_checksum: unit " + span_text(unit) + " outside its block " + span_text(block_span));
    }
    const std::int64_t block_rows = span_rows(layout, block_span), unit_rows = span_rows(layout, unit);
    const std::int64_t before = unit.piece() ? unit.row_first - block_span.row_first
                                             : span_rows(layout, OutputSpan{block_span.first, unit.first, 0, 0});
    const std::size_t d_out = z(layout.d_out), heads = z(layout.heads), len = z(layout.len);
    detail::Xxh3 hash;
    hash.add(block.output + z(before) * d_out, z(unit_rows) * d_out * sizeof(float));
    if (layout.packed || unit.piece()) {
        for (std::size_t h = 0; h < heads; ++h) {
            hash.add(block.lse + h * z(block_rows) + z(before), z(unit_rows) * sizeof(float));
        }
    } else {
        hash.add(block.lse + z(before) * heads, z(unit_rows) * heads * sizeof(float));
    }
    if (unit.piece()) {
        if (unit.row_last == layout.rows_of(unit.first)) hash.add(block.lengths, sizeof(std::int32_t));
    } else {
        hash.add(block.lengths + (unit.first - block_span.first), z(unit.last - unit.first) * sizeof(std::int32_t));
    }
    const auto [begin, end] = layout.weights_range(unit.first, unit.last);
    if (end > begin) {
        const bool f16 = layout.weights_dtype == WeightsDtype::f16;
        const std::size_t element = f16 ? sizeof(std::uint16_t) : sizeof(float);
        const auto* base = f16 ? static_cast<const unsigned char*>(static_cast<const void*>(block.attention_f16))
                               : static_cast<const unsigned char*>(static_cast<const void*>(block.attention_f32));
        const std::size_t map_heads = z(layout.weights_heads());
        if (unit.piece()) {
            for (std::size_t h = 0; h < map_heads; ++h) {
                hash.add(base + ((h * z(block_rows) + z(before)) * len) * element, z(unit_rows) * len * element);
            }
        } else {
            const auto [block_begin, block_end] = layout.weights_range(block_span.first, block_span.last);
            (void)block_end;
            const std::int64_t rows_before = span_rows(layout, OutputSpan{block_begin, begin, 0, 0});
            const std::int64_t rows = span_rows(layout, OutputSpan{begin, end, 0, 0});
            hash.add(base + z(rows_before) * map_heads * len * element, z(rows) * map_heads * len * element);
        }
    }
    return hash.digest();
}

void OutputFile::StagingFree::operator()(char* p) const noexcept { std::free(p); }

char* OutputFile::staging(std::size_t bytes) {
    if (bytes > staging_bytes_) {
        constexpr std::size_t kPage = 4096;
        const std::size_t rounded = (bytes + kPage - 1) / kPage * kPage;
        staging_.reset(static_cast<char*>(std::aligned_alloc(kPage, rounded)));
        if (!staging_) throw std::bad_alloc();
        staging_bytes_ = rounded;
    }
    return staging_.get();
}

template <class Fill, class ThroughHdf5>
void OutputFile::write_staged(std::unique_ptr<DirectChunks>& slot, const std::optional<Dataset>& dataset, std::uint64_t first,
                              std::uint64_t count, Fill fill, ThroughHdf5 through_hdf5, Transfer transfer) {
    DirectChunks* chunks = count > 0 ? direct_chunks(slot, dataset, transfer) : nullptr;
    const auto [begin, end] = chunks ? chunks->whole_chunks(first, count) : std::pair<std::uint64_t, std::uint64_t>{first, first};
    if (begin == end) return through_hdf5(first, first + count);
    if (begin > first) through_hdf5(first, begin);
    // Batches of whole chunks of about 4 MiB: writes large enough for the disk, a buffer small
    // beside a step's memory (the memory model's process margin holds it).
    const std::uint64_t chunk = chunks->chunk_bytes() / chunks->element_size();
    const std::uint64_t batch = chunk * std::max<std::uint64_t>(1, (std::uint64_t{4} << 20) / chunks->chunk_bytes());
    for (std::uint64_t at = begin; at < end; at += batch) {
        const std::uint64_t stop = std::min(end, at + batch);
        char* buffer = staging(static_cast<std::size_t>(batch) * chunks->element_size());  // through_hdf5 may use it too
        fill(buffer, at, stop);
        const auto written = write_whole_chunks(slot, dataset, at, stop - at, buffer, transfer);
        if (written.first == written.second) through_hdf5(at, stop);
    }
    if (end < first + count) through_hdf5(end, first + count);
}

void OutputFile::write_packed_rows(std::uint64_t first, std::uint64_t count, const float* rows, Transfer transfer) {
    const std::uint64_t d = static_cast<std::uint64_t>(layout_.d_out);
    const auto hdf5_rows = [&](std::uint64_t begin, std::uint64_t end) {  // elements, on row bounds
        const WriteTurns::Turn turn(write_turns(transfer));
        write_rows(*h5_->output, begin / d, (end - begin) / d, rows + (begin - first * d), static_cast<std::size_t>(end - begin),
                   transfer);
    };
    const auto copy = [&](char* dst, std::uint64_t begin, std::uint64_t end) {
        std::memcpy(dst, rows + (begin - first * d), static_cast<std::size_t>(end - begin) * sizeof(float));
    };
    // The step's rows straight from its memory when a chunk's start falls on a page there; else
    // through the staging buffer, a copy, which the page cache's way makes too.
    DirectChunks* chunks = count > 0 ? direct_chunks(direct_output_, h5_->output, transfer) : nullptr;
    if (chunks != nullptr) {
        const auto whole = chunks->whole_chunks(first * d, count * d);
        if (whole.first < whole.second && DirectChunks::memory_on_bound(rows + (whole.first - first * d))) {
            return write_chunked_rows(direct_output_, h5_->output, first, count, static_cast<std::size_t>(d), rows, transfer);
        }
    }
    write_staged(direct_output_, h5_->output, first * d, count * d, copy, hdf5_rows, transfer);
}

void OutputFile::write_zero_map_rows(std::uint64_t map, std::uint64_t head, std::uint64_t row, std::uint64_t end,
                                     Transfer transfer) {
    const MemType type = layout_.weights_dtype == WeightsDtype::f16 ? MemType::f16_bits : MemType::f32;
    const auto len = static_cast<std::uint64_t>(layout_.len);
    const std::uint64_t row_bytes = len * layout_.weights_element_bytes();
    const std::uint64_t per = std::max<std::uint64_t>(1, (std::uint64_t{1} << 20) / row_bytes);  // a staging buffer's worth
    char* zeros = staging(static_cast<std::size_t>(per * row_bytes));
    std::memset(zeros, 0, static_cast<std::size_t>(per * row_bytes));
    for (std::uint64_t n = 0; row < end; row += n) {
        n = std::min(per, end - row);
        write_boxes(*h5_->attention, {Slab{{map, head, row, 0}, {1, 1, n, len}}}, type, zeros, static_cast<std::size_t>(n * len),
                    transfer);
    }
}

void OutputFile::write_packed_maps(const OutputSpan& span, const void* maps, Transfer transfer) {
    const auto [seq_begin, seq_end] = layout_.weights_range(span.first, span.last);
    if (seq_end <= seq_begin) return;
    const auto z = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
    const std::uint64_t heads = z(layout_.weights_heads()), len = z(layout_.len);
    const std::size_t element = layout_.weights_element_bytes();
    const MemType type = layout_.weights_dtype == WeightsDtype::f16 ? MemType::f16_bits : MemType::f32;
    const auto* compact = static_cast<const char*>(maps);
    // Where each sequence's map starts in the block's memory ([heads, its rows, L], one after
    // the other), in rows of L elements.
    std::vector<std::uint64_t> rows_before(z(seq_end - seq_begin) + 1, 0);
    for (std::int64_t s = seq_begin; s < seq_end; ++s) {
        rows_before[z(s - seq_begin) + 1] = rows_before[z(s - seq_begin)] + heads * z(layout_.rows_of(s));
    }
    // The file's rows R of L elements: map R / (heads L), head R / L % heads, row R % L.
    const std::uint64_t map_rows = heads * len, first_row = z(seq_begin - layout_.weights_first) * map_rows;
    const auto locate = [&](std::uint64_t file_row, std::int64_t& s, std::uint64_t& h, std::uint64_t& r) {
        s = layout_.weights_first + static_cast<std::int64_t>(file_row / map_rows);
        h = file_row / len % heads;
        r = file_row % len;
    };
    const std::uint64_t row_bytes = len * element;
    const auto fill = [&](char* dst, std::uint64_t begin, std::uint64_t end) {  // elements, on row bounds
        for (std::uint64_t row = begin / len; row < end / len; ++row, dst += row_bytes) {
            std::int64_t s = 0;
            std::uint64_t h = 0, r = 0;
            locate(row, s, h, r);
            const std::uint64_t rows = z(layout_.rows_of(s));
            if (r < rows) {
                std::memcpy(dst, compact + (rows_before[z(s - seq_begin)] + h * rows + r) * row_bytes, row_bytes);
            } else {
                std::memset(dst, 0, row_bytes);
            }
        }
    };
    // Through HDF5: for each (map, head) the rows the range holds, those inside the sequence
    // from the block's memory and those past it as zeros.
    const auto hdf5_rows = [&](std::uint64_t begin, std::uint64_t end) {  // elements, on row bounds
        const WriteTurns::Turn turn(write_turns(transfer));
        for (std::uint64_t row = begin / len; row < end / len;) {
            std::int64_t s = 0;
            std::uint64_t h = 0, r = 0;
            locate(row, s, h, r);
            const std::uint64_t stop = std::min(end / len, row - r + len), rows = z(layout_.rows_of(s));
            const hsize_t map = z(s - layout_.weights_first);
            if (r < rows) {
                const std::uint64_t n = std::min(stop - row, rows - r);
                write_boxes(*h5_->attention, {Slab{{map, h, r, 0}, {1, 1, n, len}}}, type,
                            compact + (rows_before[z(s - seq_begin)] + h * rows + r) * row_bytes, n * len, transfer);
                row += n;
                r += n;
            }
            if (row < stop) write_zero_map_rows(map, h, r, r + (stop - row), transfer);
            row = stop;
        }
    };
    write_staged(direct_maps_, h5_->attention, first_row * len, z(seq_end - seq_begin) * map_rows * len, fill, hdf5_rows, transfer);
}

void OutputFile::write_span(const OutputSpan& span, const OutputBlock& block, Transfer transfer) {
    if (!layout_.packed && !span.piece()) return write_block(span.first, span.last, block, transfer);
    if (!h5_->file.is_open()) throw std::logic_error("OutputFile::write_span after close");
    check_span(layout_, span);
    const SpanSizes sizes = span_sizes(layout_, span);
    const Boxes boxes = boxes_of(layout_, span);
    const auto need = [](const void* pointer, const char* name, std::size_t count) {
        if (count > 0 && pointer == nullptr) throw std::invalid_argument(std::string("OutputFile::write_span: ") + name + " is null");
    };
    need(block.output, "output", sizes.output);
    need(block.lse, "lse", sizes.lse);
    need(block.lengths, "lengths", sizes.lengths);
    const bool f16 = layout_.weights_dtype == WeightsDtype::f16;
    const void* maps = f16 ? static_cast<const void*>(block.attention_f16) : static_cast<const void*>(block.attention_f32);
    if (h5_->attention) need(maps, f16 ? "attention_f16" : "attention_f32", sizes.attention);
    // An uncompressed packed file's maps have no fill (create_packed): its whole sequences are
    // written padded (write_packed_maps), and a sequence's last piece writes the rows past its
    // length as zeros.
    const bool padded_maps = layout_.packed && layout_.gzip_level == 0;
    const bool padded_whole = padded_maps && !span.piece();  // whole sequences: write_packed_rows and _maps
    if (padded_maps && h5_->attention && transfer != Transfer::independent) {
        // Collective writes need one call per dataset on every rank; uncompressed outputs are
        // written independently (parallel_io.cpp), and these maps have no fill to lean on.
        throw std::logic_error("OutputFile::write_span: an uncompressed packed output's maps are written independently");
    }
    try {
        if (padded_whole) {
            const std::int64_t t0 = row_of(layout_, span.first);
            write_packed_rows(static_cast<std::uint64_t>(t0), static_cast<std::uint64_t>(span_rows(layout_, span)), block.output,
                              transfer);
            if (h5_->attention) write_packed_maps(span, maps, transfer);
        }
        const WriteTurns::Turn turn(write_turns(transfer));
        // Collective writes pair up across ranks in call order, and a rank writing a piece meets
        // ranks writing whole padded sequences (write_block()) in the same writes: the same order
        // as there, output, attention, lse, lengths. (With lse before attention, two ranks of a
        // compressed run with maps met in different datasets' writes and HDF5 read one's chunk
        // from the other's data: "inflate() failed".)
        if (!padded_whole) {
            write_boxes(*h5_->output, boxes.output, MemType::f32, block.output, sizes.output, transfer);
        }
        if (h5_->attention && !padded_whole) {
            const MemType type = f16 ? MemType::f16_bits : MemType::f32;
            if (boxes.attention.size() > 1 && transfer == Transfer::independent) {
                // Not collective: one write per map, each shaped like its box, many times faster
                // than a union of boxes from flat memory (which collective writes need: one
                // call per dataset on every rank).
                const auto* at = static_cast<const unsigned char*>(maps);
                for (const Slab& box : boxes.attention) {
                    const std::size_t elements = element_count(box.count);
                    write_boxes(*h5_->attention, {box}, type, at, elements, transfer);
                    at += elements * mem_type_size(type);
                }
            } else {
                write_boxes(*h5_->attention, boxes.attention, type, maps, sizes.attention, transfer);
            }
            const std::int64_t rows = layout_.rows_of(span.first);
            if (padded_maps && span.row_last == rows && rows < layout_.len && !boxes.attention.empty()) {
                // The last piece: the rows past the sequence's length, zeros.
                const auto map = static_cast<std::uint64_t>(span.first - layout_.weights_first);
                for (std::uint64_t h = 0; h < static_cast<std::uint64_t>(layout_.weights_heads()); ++h) {
                    write_zero_map_rows(map, h, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(layout_.len), transfer);
                }
            }
        }
        write_boxes(*h5_->lse, boxes.lse, MemType::f32, block.lse, sizes.lse, transfer);
        write_boxes(*h5_->lengths, boxes.lengths, MemType::i32, block.lengths, sizes.lengths, transfer);
    } catch (const H5Error& error) {
        throw Error(exit_io, partial_path() + ": cannot write " + span_text(span) + ": " + error.what());
    } catch (const std::system_error& error) {
        throw Error(exit_io, partial_path() + ": cannot write " + span_text(span) + ": " + error.what());
    }
    if (h5_->journal_progress) remember_span_checksums(span, block);
}

std::pair<std::size_t, std::size_t> OutputFile::units_of(const OutputSpan& span) const {
    using Position = std::pair<std::int64_t, std::int64_t>;
    const auto position = [&](std::size_t u) { return Position{unit_bounds_[u], unit_rows_.empty() ? 0 : unit_rows_[u]}; };
    const auto find = [&](const Position& wanted) -> std::size_t {
        std::size_t low = 0, high = unit_bounds_.size();
        while (low < high) {
            const std::size_t mid = (low + high) / 2;
            if (position(mid) < wanted) low = mid + 1;
            else high = mid;
        }
        if (low == unit_bounds_.size() || position(low) != wanted) {
            throw std::logic_error("OutputFile: " + span_text(span) + " does not start and end on journal units");
        }
        return low;
    };
    const Position start{span.first, span.piece() ? span.row_first : 0};
    const Position end = !span.piece() ? Position{span.last, 0}
                         : span.row_last == layout_.rows_of(span.first) ? Position{span.first + 1, 0}
                                                                        : Position{span.first, span.row_last};
    return {find(start), find(end)};
}

OutputSpan OutputFile::unit_span(std::size_t u) const {
    const std::int64_t first = unit_bounds_[u], next = unit_bounds_[u + 1];
    const std::int64_t row = unit_rows_.empty() ? 0 : unit_rows_[u], next_row = unit_rows_.empty() ? 0 : unit_rows_[u + 1];
    if (row == 0 && next_row == 0) return OutputSpan{first, next, 0, 0};
    return OutputSpan{first, first + 1, row, next == first ? next_row : layout_.rows_of(first)};
}

void OutputFile::remember_span_checksums(const OutputSpan& span, const OutputBlock& block) {
    if (span.first == span.last) return;
    const auto [begin, end] = units_of(span);
    for (std::size_t u = begin; u < end; ++u) {
        pending_.emplace_back(static_cast<std::int64_t>(u),
                              static_cast<std::int64_t>(span_checksum(layout_, unit_span(u), span, block)));
    }
}

std::uint64_t OutputFile::stored_checksum(const OutputSpan& span, ChunksReadBack* read_back) const {
    const SpanSizes sizes = span_sizes(layout_, span);
    const Boxes boxes = boxes_of(layout_, span);
    std::vector<float> output(sizes.output), lse(sizes.lse), attention_f32;
    std::vector<std::int32_t> lengths(sizes.lengths);
    std::vector<std::uint16_t> attention_f16;
    read_boxes(*h5_->output, boxes.output, MemType::f32, output.data(), output.size());
    read_boxes(*h5_->lse, boxes.lse, MemType::f32, lse.data(), lse.size());
    read_boxes(*h5_->lengths, boxes.lengths, MemType::i32, lengths.data(), lengths.size());
    OutputBlock block{output.data(), lse.data(), lengths.data(), nullptr, nullptr};
    if (h5_->attention && sizes.attention > 0) {
        if (layout_.weights_dtype == WeightsDtype::f16) {
            attention_f16.resize(sizes.attention);
            read_boxes(*h5_->attention, boxes.attention, MemType::f16_bits, attention_f16.data(), attention_f16.size());
            block.attention_f16 = attention_f16.data();
        } else {
            attention_f32.resize(sizes.attention);
            read_boxes(*h5_->attention, boxes.attention, MemType::f32, attention_f32.data(), attention_f32.size());
            block.attention_f32 = attention_f32.data();
        }
    }
    if (read_back) {
        note_chunks_read(*h5_->output, boxes.output, read_back->output);
        note_chunks_read(*h5_->lse, boxes.lse, read_back->lse);
        note_chunks_read(*h5_->lengths, boxes.lengths, read_back->lengths);
        if (h5_->attention && sizes.attention > 0) note_chunks_read(*h5_->attention, boxes.attention, read_back->attention);
    }
    return span_checksum(layout_, span, span, block);
}

}  // namespace attnbatch::io
