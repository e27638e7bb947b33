// The file `weights` writes: attention maps recomputed for chosen sequences and heads,
//   /attention  float32 [S, H_sel, L, L]  attributes sequences [S] and heads [H_sel], the
//               indices chosen, in the order of the axes
// and the root attribute source, the output they were recomputed from. Written as
// PATH.partial and published once whole (staged_file.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnbatch::io {

struct AttentionMaps {
    std::vector<std::int64_t> sequences;  // S
    std::vector<std::int64_t> heads;      // H_sel
    std::int64_t len = 0;                 // L
    std::vector<float> values;            // (S, H_sel, L, L)
    std::string source;
};

// Replaces an existing PATH only with `force`; a .partial left by an earlier attempt is
// removed first. H5Error (exit 4) when HDF5 cannot write, Error when publishing fails.
void write_attention_maps(const std::string& path, const AttentionMaps& maps, bool force);

}  // namespace attnbatch::io
