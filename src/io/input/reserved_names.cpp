#include "attnbatch/io/input/reserved_names.hpp"

#include "attnbatch/io/h5/schema_names.hpp"

namespace attnbatch::io {

std::string input_schema_meaning(const std::string& path, bool packed) {
    if (path == dataset::lengths) return "the sequence lengths (integer [N])";
    if (path == dataset::offsets) return "the packed layout's sequence offsets (int64 [N+1])";
    if (path == dataset::query) return "the queries (--query, [N, L, H*d_k])";
    if (path == dataset::key) return "the keys (--key, [N, L, H*d_k])";
    if (path == dataset::value) return "the values (--value, [N, L, H*d_v])";
    // A packed file's rows are its embeddings; a padded file's /tokens would be taken for them
    // once /offsets were there, and is not found by run without --dataset.
    if (path == dataset::tokens && !packed) return "the packed layout's rows ([T, d], --layout packed)";
    return {};
}

}  // namespace attnbatch::io
