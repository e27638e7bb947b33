// Writing the files a run reads, the inverse of describe_input() and InputReader:
//   the input     embeddings float32/64 [N, L, d]                          labels N, L, d
//                 or /query, /key [N, L, H*d_k] and /value [N, L, H*d_v]   labels N, L, H*d_k|H*d_v
//                 or the same split by head, [N, H, L, d_k|d_v]            labels N, H, L, d_k|d_v
//                 and, for ragged sequences, int32 /lengths [N]            label N
//                 or, packed (input_spec.hpp), the same with [T, ...] in place of [N, L, ...] and
//                 /offsets int64 [N+1] (no /lengths)                     labels T, ...; N+1
//   the weights   through models/weights_writer.hpp, the one writer of weights files
// plus root attributes saying what the file is and how it was made (h5/schema_names.hpp).
// Datasets are chunked about 1 MiB along whole sequences (rows). The values come from the
// caller, computed run by run (ValueSource), so memory stays bounded whatever N is; each file
// is written as PATH.partial and published only once whole (output/staged_file.hpp).
#pragma once

#include "attnbatch/io/h5/computed_values.hpp"
#include "attnbatch/io/h5/dims.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/models/weights_writer.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace attnbatch::io {

// How a synthetic file was made, recorded as root attributes so that it can be made again.
struct GeneratorRecord {
    std::string generator;                // "attnbatch generate 0.1.0"
    std::uint64_t seed = 0;
    double scale_values = 1.0;            // input only: the factor applied to the data
    std::optional<std::int64_t> min_len;  // input only: the least length drawn, when ragged
};

struct InputContent {
    InputMode mode = InputMode::embeddings;
    QkvLayout layout = QkvLayout::packed;  // qkv mode
    DataType dtype = DataType::float32;
    std::int64_t n = 0, len = 0, heads = 1;
    std::int64_t kv_heads = 0;             // qkv mode: G heads of keys and values; 0: G = H
    std::int64_t d = 0;                    // embeddings mode: the width
    std::int64_t d_k = 0, d_v = 0;         // qkv mode: per head
    std::string embeddings_path = dataset::embeddings;
    ValueSource embeddings;                // embeddings mode
    ValueSource query, key, value;         // qkv mode; the index follows the layout
    ValueSource lengths;                   // empty: no /lengths (every sequence has L tokens)
    // The packed layout: sequence n is rows [offsets[n], offsets[n+1]) of [T, ...] datasets
    // (T = offsets.back()), whose sources are indexed [t, column].
    bool packed = false;
    std::vector<std::int64_t> offsets;
};

// Where the files go; the options name them in messages.
struct InputDestination {
    std::string path;
    std::string option = "--output";
    std::string weights_path;  // empty: no weights file
    std::string weights_option = "--weights-out";
    bool force = false;        // replace existing files, remove left-over .partial files
    std::size_t slab_bytes = default_slab_bytes;
};

struct WrittenInput {
    std::vector<WrittenDataset> input, weights;  // in the order written
};

// Uncompressed payload bytes, in double: the requested sizes may exceed 2^64.
double input_bytes(const InputContent& content);

// Checks both destinations (prepare_new_file) before writing either, writes the input and,
// with `weights`, the weights file, then publishes both; on failure no .partial is left.
// Error as prepare_new_file; H5Error (exit 4) when HDF5 cannot write.
WrittenInput write_input_files(const InputDestination& destination, const InputContent& input,
                               const std::optional<WeightsContent>& weights, const GeneratorRecord& record);

}  // namespace attnbatch::io
