// Whether a file is a well-formed output of `run`, as docs/formats.md "Output file" describes it (or
// its packed layout, /offsets giving the rows of each sequence, lengths their count):
// dtypes, shapes consistent with each other, the first_sequence of a subset of attention maps, /config,
// the `complete` attribute, and /lengths (which doubles as the written-sequence marker: -1
// until a sequence is written).
#pragma once

#include "attnbatch/io/h5/file_schema.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnbatch::io {

struct OutputCheck {
    std::int64_t n = 0, len = 0, d_out = 0, heads = 0;  // 0 where the datasets do not say
    bool packed = false;     // the packed layout (/output [T, D_out], /lse [H, T], /offsets)
    std::int64_t tokens = 0;  // packed: T
    bool has_attention = false;
    std::string attention_dtype;  // "float32" or "float16"
    std::int64_t first_sequence = 0;  // the input sequence of row 0 (root attribute, run --sequences)
    std::int64_t attention_first = 0, attention_count = 0, attention_heads = 0;  // first: an input sequence
    std::optional<std::int64_t> complete;  // the root attribute, when present and an integer
    std::int64_t written = -1;             // sequences with /lengths >= 0; -1 when not counted
    std::vector<std::string> problems;     // each makes the file invalid; one line each
    std::vector<std::string> warnings;     // worth saying, not invalidating

    bool valid() const { return problems.empty(); }
};

// `schema` is read_file_schema(path)'s; the file is opened again (read-only) for the values of
// /lengths and /offsets. H5Error when it cannot be opened or they cannot be read.
OutputCheck check_output(const std::string& path, const FileSchema& schema);

}  // namespace attnbatch::io
