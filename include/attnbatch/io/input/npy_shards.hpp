// .npy shards read in place as one input (docs/formats.md, ".npy shards"):
//
//   --input        a glob ('shards/*.npy'), a directory (its *.npy files), one .npy file, or a
//                  text file (.txt or .list) naming one shard per line (relative to the list's
//                  directory; blank lines and lines starting with '#' skipped). Globs and
//                  directories are taken in natural order (shard_2 before shard_10); a list
//                  file in its own order. The sidecars lengths.npy and offsets.npy (and the
//                  file --lengths names) are never shards.
//   padded         every shard [n_i, L, d], one dtype (float32, float64 or float16), one L and d;
//                  N = sum n_i. Lengths: --lengths FILE.npy, else lengths.npy beside the first
//                  shard when present, else every sequence has L tokens; integer [N],
//                  0 <= length <= L. --lengths none ignores lengths.npy.
//   packed         every shard [T_i, d]; the rows of all shards end to end are T = sum T_i
//                  tokens. Sequences: offsets.npy beside the first shard, integer [N+1] from 0
//                  rising to T (sequence n is rows offsets[n]..offsets[n+1], which may cross a
//                  shard boundary), and/or lengths (--lengths FILE.npy or lengths.npy), integer
//                  [N] summing to T; both present must agree.
//
// Only the embeddings mode: Q = K = V = X, or projections through --weights. --query, --key
// and --value name datasets of an HDF5 input and are refused with shards (exit 2), as is a
// --dataset other than the default.
//
// The shards are memory-mapped by InputReader and ValueScanner: no copy of the input is made.
#pragma once

#include "attnbatch/io/input/input_spec.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace attnbatch::io {

// Whether --input names .npy shards rather than an HDF5 file: a glob, a directory, a path
// ending in .npy, or a list file ending in .txt or .list.
bool is_npy_input(const std::string& input_path);

// Fills spec (shards, dtype, N, L or T, d, heads, lengths and offsets sidecars) from the shards
// --input names; the rules above. Error: exit 2 for options shards cannot take, 3 for the
// files' content (naming the shard and the expected value), 4 for files that cannot be read
// or a glob that matches nothing.
void describe_npy_input(const InputOptions& options, InputSpec& spec);

// The valid-token count of every stored sequence (padded: the lengths sidecar, else L).
std::vector<std::int32_t> npy_stored_lengths(const InputSpec& spec);
// Packed: the N + 1 row offsets of every stored sequence (the offsets sidecar, else the
// running sum of the lengths sidecar).
std::vector<std::int64_t> npy_stored_offsets(const InputSpec& spec);

// The shards mapped read-only, seen as one array along their first axis (rows: sequences
// when padded, tokens when packed).
class NpyShardSet {
public:
    explicit NpyShardSet(const InputSpec& spec);
    NpyShardSet(NpyShardSet&&) noexcept;
    NpyShardSet& operator=(NpyShardSet&&) noexcept;
    ~NpyShardSet();

    std::int64_t row_width() const noexcept { return row_width_; }  // elements per row
    // Elements [first, first + count) of the concatenated shards, as float32.
    void read_elements(std::int64_t first, std::int64_t count, float* out) const;
    // Rows [first, first + count) into out (resized).
    void read_rows(std::int64_t first, std::int64_t count, std::vector<float>& out) const;
    // Where rows [first, first + count) lie as float32, when they can be read there: all in
    // one little-endian float32 shard, from a cache-line bound on (a .npy header pads the data
    // to one). Null otherwise (read_rows copies and converts them).
    const float* rows_in_place(std::int64_t first, std::int64_t count) const noexcept;
    // Error (exit 3) naming the shard, the index within it and the value of the first element of
    // rows [first, last) that is not finite or, float64, beyond float32's range.
    void expect_finite_rows(std::int64_t first, std::int64_t last) const;

private:
    // The shard holding row `row` (the last whose first row is at or before it).
    std::size_t shard_of(std::int64_t row) const noexcept;
    struct Mapped;
    std::vector<Mapped> shards_;
    std::vector<std::int64_t> first_row_;  // per shard, and the total rows at the end
    std::int64_t row_width_ = 0;
};

}  // namespace attnbatch::io
