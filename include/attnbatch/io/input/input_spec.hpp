// What the input of a run is, checked completely before any compute: the embeddings (or
// Q/K/V) file, the optional lengths, and the optional projection weights file.
//
// describe_input() opens the files read-only, checks every rule of docs/formats.md (shapes, dtypes,
// lengths bounds, heads, weights agreement, finiteness) and either returns an InputSpec or
// throws Error with a one-line message and the exit code:
//   2 (exit_usage)         options that cannot work together, or --heads incompatible
//                          with the data (not dividing d, the packed axis, or H*d_k);
//   3 (exit_invalid_input) the files' content: not HDF5, missing dataset, rank, dtype, N = 0,
//                          shape disagreements, lengths out of range, NaN or inf;
//   4 (exit_io)            a file that cannot be opened or read (missing, unreadable, locked).
#pragma once

#include "attnbatch/error.hpp"
#include "attnbatch/io/h5/scan.hpp"
#include "attnbatch/io/models/weights_spec.hpp"
#include "attnbatch/io/output/output_layout.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnbatch::io {

struct InputOptions {
    std::string input_path;
    // empty: /embeddings (exclusive with query/key/value); /embeddings when the file has none
    // but has /tokens and /offsets: /tokens, the packed layout
    std::string dataset;
    std::string lengths;   // empty: /lengths when the file has it; "none": no lengths; a name given must exist
    std::string query;     // query, key, value: all three or none
    std::string key;
    std::string value;
    int heads = 0;         // 0: not given (1 for embeddings and packed Q/K/V; from the data for [N, H, L, d_k];
                           // the weights file's attribute `heads` with --weights)
    int kv_heads = 0;      // G, the K/V heads of grouped-query attention; 0: not given (the weights file's
                           // attribute `kv_heads`, else what the shapes say, else H)
    std::string weights_path;  // empty: no projections
    bool check_finite = true;  // the full-data NaN/inf scan; costs one read of every input
    std::size_t scan_bytes = default_scan_bytes;  // memory bound of the scans
};

enum class InputMode { embeddings, qkv };

// One .npy shard of an input read in place (npy_shards.hpp): its rows along the first axis,
// where its data start and their byte order, as checked by describe_input().
struct NpyShard {
    std::string path;
    std::int64_t rows = 0;
    std::int64_t data_offset = 0;
    bool big_endian = false;
};
// packed: [N, L, H*d] with heads side by side in the last axis; split: [N, H, L, d].
enum class QkvLayout { packed, split };
// Two layouts of the sequences: padded, every dataset [N, L, ...] with the valid tokens in
// /lengths; packed (docs/formats.md "packed layout"), the datasets [T, ...] holding every sequence's
// tokens end to end and /offsets int64 [N+1] saying where each starts: sequence n is rows
// [offsets[n], offsets[n+1]), its length their difference. A 2-D data dataset is packed.
struct InputSpec {
    std::string path;
    InputMode mode = InputMode::embeddings;
    std::string dataset;                   // embeddings mode
    std::string query, key, value;         // qkv mode
    QkvLayout layout = QkvLayout::packed;  // qkv mode
    std::string lengths;                   // empty: every sequence has L tokens

    std::int64_t n = 0;      // sequences (those selected: see first_sequence)
    std::int64_t len = 0;    // L: tokens per sequence (padded); packed: the longest sequence (at least 1)
    std::int64_t d = 0;      // embedding width (embeddings mode; 0 for qkv)
    std::int64_t heads = 0;  // H
    std::int64_t kv_heads = 0;  // G (divides H): K and V hold G heads; 0: G = H
    std::int64_t d_k = 0;    // per head
    std::int64_t d_v = 0;    // per head
    DataType dtype = DataType::float32;  // the widest data dataset's (float16 and bfloat16 mixed: float32)

    std::optional<WeightsSpec> weights;

    // The selected sequences are [first_sequence, first_sequence + n) of the stored datasets
    // (run --sequences): readers and scans add it, everything else counts from 0.
    std::int64_t first_sequence = 0;
    bool packed = false;      // the packed layout
    std::string offsets;      // packed: the offsets dataset (/offsets)
    std::int64_t tokens = 0;  // packed: T, the rows of the data datasets

    // Not empty: the input is these .npy shards (npy_shards.hpp), path is --input as given, and
    // lengths and offsets name the sidecar .npy files (empty: none).
    std::vector<NpyShard> shards;
    bool npy() const noexcept { return !shards.empty(); }

    // Width of /output: d_out with w_o, else H*d_v.
    std::int64_t d_out() const;
    std::int64_t kv_head_count() const { return kv_heads > 0 ? kv_heads : heads; }
};

InputSpec describe_input(const InputOptions& options);

// The output such an input gives: N, L, H and D_out; every other field keeps its default.
OutputLayout output_layout_for(const InputSpec& spec);

// Narrows a described input to its sequences [first, last) (0 <= first < last <= spec.n, else
// std::invalid_argument): spec.n becomes last - first, spec.first_sequence grows by first.
void select_sequences(InputSpec& spec, std::int64_t first, std::int64_t last);

}  // namespace attnbatch::io
