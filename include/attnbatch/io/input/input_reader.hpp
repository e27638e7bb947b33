// Loading validated input into float32 memory: blocks of whole sequences (the projection
// weights: models/weights_reader.hpp).
// float64 data is converted by HDF5 during the read (describe_input has already rejected
// values beyond float32's range).
#pragma once

#include "attnbatch/io/h5/file_access.hpp"
#include "attnbatch/io/input/input_spec.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace attnbatch::io {

// Sequences [first, first + count) as stored; the buffers are reused between reads.
//   padded: x (count, L, d) in embeddings mode, q, k, v (count, L, H*d) packed or
//           (count, H, L, d) split;
//   packed layout (offsets not empty): the sequences' rows end to end, sequence first + i in
//           rows [offsets[i], offsets[i+1]) of x (rows, d) or q, k, v (rows, H*d);
//   a piece (row_last > 0, count = 1): query rows [row_first, row_last) of sequence `first`
//           and its first key_rows keys: x holds its rows [0, key_rows), which include the
//           queries' valid rows; or q holds rows [row_first, min(row_last, length)) and k, v
//           rows [0, key_rows), as (rows, H*d) or, split, (H, rows, d).
struct InputBlock {
    std::int64_t first = 0;
    std::int64_t count = 0;
    std::vector<float> x;
    std::vector<float> q, k, v;
    std::vector<std::int32_t> lengths;  // (count); L when the input has no lengths
    std::vector<std::int64_t> offsets;  // packed layout: count + 1 row offsets from 0; empty: padded
    std::int64_t row_first = 0, row_last = 0, key_rows = 0;  // a piece; row_last = 0: whole sequences
    // Where read() left an array's rows in place, in the input file's mapped pages
    // (InputReader::read_in_place), instead of copying them into its vector: their first
    // element and count; data null where the vector holds them.
    struct InPlace {
        const float* data = nullptr;
        std::size_t count = 0;
    };
    InPlace x_in_place, q_in_place, k_in_place, v_in_place;

    bool piece() const noexcept { return row_last > 0; }
    // Copies the arrays read in place into their vectors, as a read without read_in_place
    // leaves them (for a caller that sends the vectors on).
    void copy_in_place();
    // Rows of q held by a piece: its query rows below the sequence's length.
    std::int64_t query_rows() const noexcept;
};

class InputReader {
public:
    explicit InputReader(const InputSpec& spec, const FileAccess& access = {});
    InputReader(InputReader&&) noexcept;
    InputReader& operator=(InputReader&&) noexcept;
    ~InputReader();

    // Reads sequences [first, last); Error (exit 4) when HDF5 fails to read.
    void read(std::int64_t first, std::int64_t last, InputBlock& block);
    // Reads the piece of `sequence` with query rows [row_first, row_last) and key rows
    // [0, key_rows) (key_rows at most its length), as InputBlock describes.
    void read_piece(std::int64_t sequence, std::int64_t row_first, std::int64_t row_last, std::int64_t key_rows,
                    InputBlock& block);
    // Every sequence's valid-token count (L for all without a lengths dataset): what plans need.
    std::vector<std::int32_t> read_all_lengths();
    // From now on read() also checks that every value it read is finite: Error (exit 3) naming
    // the dataset and the sequences otherwise. For float32, float16 and bfloat16 data, whose
    // values arrive as stored (float64 beyond float32's range needs the scan of input_spec.hpp).
    void check_values(bool on) noexcept { check_values_ = on; }
    // From now on read() leaves the rows of whole sequences where they lie in the input file,
    // mapped, for each dataset whose elements can be read so (detail::MappedFloats; .npy
    // shards: NpyShardSet::rows_in_place, step by step), and points the block's *_in_place at
    // them instead of copying them. distributed::StepData reads either; a caller that sends
    // the vectors on calls InputBlock::copy_in_place first. The next read into the same block
    // (or copy_in_place) unmaps those rows: the block's last rows are done with by then.
    void read_in_place(bool on);

    const InputSpec& spec() const noexcept { return spec_; }

private:
    InputSpec spec_;
    struct Files;  // the input file, its data datasets (x, or q, k, v) and lengths
    std::unique_ptr<Files> files_;
    std::vector<std::int64_t> offsets_;  // packed layout: N + 1
    bool check_values_ = false;
    bool npy_in_place_ = false;  // read_in_place on .npy shards
    // Rows [row, row + rows) of the stored data into x, or q, k, v, checked when check_values
    // is on; a failure names sequences [first, last).
    void read_data(std::int64_t row, std::int64_t rows, std::int64_t first, std::int64_t last, InputBlock& block);
    void expect_finite(const InputBlock& block, std::int64_t first, std::int64_t last) const;
    // `array`: 0 for x, or 0-2 for q, k, v.
    [[noreturn]] void throw_non_finite(std::size_t array, std::int64_t first, std::int64_t last) const;
    std::int32_t length_of(std::int64_t sequence);
    void read_packed(std::int64_t first, std::int64_t last, InputBlock& block);
};

}  // namespace attnbatch::io
