// The file `weights` writes: attention maps recomputed for chosen sequences and heads,
//   /attention  float32 [S, H_sel, L, L]  attributes sequences [S] and heads [H_sel], the
//               indices chosen, in the order of the axes
// and the root attributes format = "attnbatch-attention-maps", source and source_absolute, the
// output they were recomputed from (as given and its real path). Written as PATH.partial and published once whole (staged_file.hpp).
#pragma once

#include "attnbatch/io/h5/file_schema.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace attnbatch::io {

struct AttentionMaps {
    std::vector<std::int64_t> sequences;  // S
    std::vector<std::int64_t> heads;      // H_sel
    std::int64_t len = 0;                 // L
    std::vector<float> values;            // (S, H_sel, L, L)
    std::string source;           // the output, as given
    std::string source_absolute;  // and its real path
};

// Replaces an existing PATH only with `force`; a .partial left by an earlier attempt is
// removed first. H5Error (exit 4) when HDF5 cannot write, Error when publishing fails.
void write_attention_maps(const std::string& path, const AttentionMaps& maps, bool force);

// Whether a file is such a maps file: what `inspect` reports of it.
struct AttentionMapsCheck {
    std::int64_t sequences = 0, heads = 0, len = 0;
    std::vector<std::int64_t> sequence_indices, head_indices;
    std::vector<std::string> problems;  // one line each
    bool valid() const { return problems.empty(); }
};
AttentionMapsCheck check_attention_maps(const std::string& file, const FileSchema& schema);

}  // namespace attnbatch::io
