// What the output of a run holds, in numbers (output_file.hpp describes the file): N, L, H,
// D_out, which attention maps are stored and how, and the packed layout's rows; the span one
// write covers and the canonical layout of the block it writes from.
#pragma once

#include "attnbatch/io/h5/chunking.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace attnbatch::io {

enum class SaveWeights { none, all, mean };
enum class WeightsDtype { f32, f16 };

const char* name_of(SaveWeights save);   // "none", "all", "mean"
const char* name_of(WeightsDtype type);  // "f32", "f16"

struct OutputLayout {
    std::int64_t n = 0;       // sequences
    std::int64_t len = 0;     // L
    std::int64_t heads = 0;   // H
    std::int64_t d_out = 0;   // D_out
    SaveWeights save_weights = SaveWeights::all;
    WeightsDtype weights_dtype = WeightsDtype::f32;
    std::int64_t weights_first = 0;  // A: first sequence with stored attention maps
    std::int64_t weights_last = -1;  // B (exclusive); -1: N
    int gzip_level = 0;              // 0: no compression; 1-9: shuffle + deflate
    std::size_t chunk_bytes = default_chunk_bytes;
    // > 0: no chunk holds more than this many sequences along N (nor, in the packed layout,
    // more rows along T than the same share of T's rows). A compressed chunk is rewritten whole,
    // into new file space, by every step that writes part of it (output_file_tuning keeps the
    // old space), so a compressed output's chunks must be no larger than a step's writes: with
    // chunks of 1 MiB and steps of a few sequences, the file grew with the number of steps.
    std::int64_t chunk_sequences = 0;
    // Row 0 holds this input sequence (run --sequences). Rows and weights_first/last count
    // from row 0; the attributes first_sequence and weights_sequences record input sequences.
    std::int64_t first_sequence = 0;
    // The packed layout: `offsets` (N + 1 row offsets, from 0 to T) say where each sequence's
    // rows are; len is then the longest sequence.
    bool packed = false;
    std::shared_ptr<const std::vector<std::int64_t>> offsets;

    std::int64_t tokens() const noexcept { return packed && offsets ? offsets->back() : n * len; }  // T
    // Rows sequence s has in /output: its length when packed, L when padded.
    std::int64_t rows_of(std::int64_t s) const noexcept {
        return packed ? (*offsets)[static_cast<std::size_t>(s) + 1] - (*offsets)[static_cast<std::size_t>(s)] : len;
    }

    std::int64_t weights_end() const noexcept { return weights_last < 0 ? n : weights_last; }
    std::int64_t weights_heads() const noexcept { return save_weights == SaveWeights::mean ? 1 : heads; }
    std::size_t weights_element_bytes() const noexcept { return weights_dtype == WeightsDtype::f16 ? 2 : 4; }
    std::int64_t weights_count() const noexcept {  // N_w = B - A; 0 without weights
        return save_weights == SaveWeights::none ? 0 : weights_end() - weights_first;
    }
    // The part of sequences [first, last) with stored attention maps: [max(first, A), min(last, B)),
    // empty (first == second) when they do not meet.
    std::pair<std::int64_t, std::int64_t> weights_range(std::int64_t first, std::int64_t last) const noexcept;
};

// Throws an Error (exit_usage) naming `path` and what is wrong when no output file can be made
// for `layout`: OutputFile::create calls it, and so does a run's preflight, so that --dry-run
// refuses what the run would.
void check_output_layout(const OutputLayout& layout, const std::string& path);

// The padded layout's /output [N, L, D_out], and /attention [N_w, H or 1, L, L] (the packed
// layout's too: its maps are L rows long).
Dims padded_output_dims(const OutputLayout& layout);
Dims padded_maps_dims(const OutputLayout& layout);

// Which axis of an output dataset runs along the batch: sequences (N, N_w), or the packed
// layout's rows (T).
struct BatchAxis {
    std::size_t index = 0;
    bool token_rows = false;
};
// An output dataset's chunk: about layout.chunk_bytes (chunk_shape), and along `batch` at most
// layout.chunk_sequences sequences, or their share of the rows.
Dims output_chunk_shape(const OutputLayout& layout, const Dims& dims, std::size_t element_size, BatchAxis batch);

// Where the padded layout's large datasets start their chunks along the sequences: at every
// `every`-th sequence from `first` (every = 1: at each; so too in the packed layout, whose rows
// are tokens). A write of whole sequences that starts and ends there covers whole chunks of
// /attention and /output, which go to the disk around HDF5 (direct_chunks.hpp); one that does
// not sends the parts of a chunk at its ends through HDF5.
struct SequenceChunks {
    std::int64_t first = 0, every = 1;
    bool starts_at(std::int64_t sequence) const noexcept {
        return every <= 1 || ((sequence - first) % every + every) % every == 0;
    }
};
SequenceChunks sequence_chunks(const OutputLayout& layout);

// What one write covers: whole sequences [first, last), or a piece, rows [row_first, row_last)
// of sequence `first` (last = first + 1, 0 <= row_first < row_last <= its rows).
struct OutputSpan {
    std::int64_t first = 0, last = 0;
    std::int64_t row_first = 0, row_last = 0;  // row_last = 0: whole sequences
    bool piece() const noexcept { return row_last > 0; }
};

// The elements of each array of an OutputBlock for a span (its canonical layout below).
struct SpanSizes {
    std::size_t output = 0, lse = 0, lengths = 0, attention = 0;
};
SpanSizes span_sizes(const OutputLayout& layout, const OutputSpan& span);

// One block of whole sequences [first, last) for write_block(). The attention pointer that
// matches the layout's dtype holds only the sequences of layout.weights_range(first, last),
// (count_w, H_w, L, L); it may be null when that range is empty.
// For write_span() the same arrays hold, for each sequence s of the span in turn, its rows
// r of the span (all its rows, or a piece's):
//   output     (r, D_out) after each other: padded whole sequences are (count, L, D_out)
//   lse        padded: (H, r) after each other, i.e. (count, H, L); packed: (H, total rows)
//   lengths    one per sequence the span ends (a piece: only with its sequence's last row)
//   attention  (H_w, r, L) after each other, for the sequences with stored attention maps
struct OutputBlock {
    const float* output = nullptr;             // (count, L, D_out)
    const float* lse = nullptr;                // (count, H, L)
    const std::int32_t* lengths = nullptr;     // (count)
    const float* attention_f32 = nullptr;      // (count_w, H_w, L, L)
    const std::uint16_t* attention_f16 = nullptr;  // (count_w, H_w, L, L), IEEE binary16 bits
};

}  // namespace attnbatch::io
