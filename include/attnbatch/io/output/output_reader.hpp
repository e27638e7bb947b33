// Reading a run's output back, the inverse of OutputFile (output_file.hpp): its layout, the
// provenance and configuration the run recorded, and the rows of any sequences of /output,
// /lse, /lengths and /attention, as stored. What `verify` and `weights` recompute against.
//
// The layout comes from the datasets themselves: N, L and D_out from /output, H from /lse,
// (packed layout, with /offsets: N from /offsets, L the longest sequence or /attention's L),
// and from /attention (when present) the maps' dtype, their sequences [A, B) (attribute
// first_sequence) and whether they are the mean over heads. Creation parameters that do not
// change what is read (gzip level, chunk size) keep OutputLayout's defaults.
#pragma once

#include "attnbatch/io/h5/file_access.hpp"
#include "attnbatch/io/output/output_file.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attnbatch::io {

// Sequences [first, first + count) as stored; the buffers are reused between reads.
// Packed layout: output (rows, D_out) and lse (H, rows), rows being the sequences' rows.
struct OutputRows {
    std::int64_t first = 0;
    std::int64_t count = 0;
    std::vector<float> output;          // (count, L, D_out)
    std::vector<float> lse;             // (count, H, L)
    std::vector<std::int32_t> lengths;  // (count)
    // The sequences of layout().weights_range(first, first + count) only, (count_w, H_w, L, L):
    // f32 maps in `attention`, f16 maps as IEEE binary16 bits in `attention_f16`.
    std::vector<float> attention;
    std::vector<std::uint16_t> attention_f16;
};

class OutputReader {
public:
    // Opens OUTPUT read-only: H5Error (exit 4) when it cannot be opened or its structure read.
    explicit OutputReader(const std::string& path, const FileAccess& access = {});
    OutputReader(OutputReader&&) noexcept;
    OutputReader& operator=(OutputReader&&) noexcept;
    ~OutputReader();

    const std::string& path() const noexcept { return path_; }
    // The root attribute `complete` is 1: every sequence was written. An output counts only then.
    bool complete() const noexcept { return complete_; }
    const OutputLayout& layout() const noexcept { return layout_; }
    bool has_attention() const noexcept { return has_attention_; }

    // The root attributes of provenance, and /config; an attribute that is absent keeps
    // Provenance's default.
    Provenance provenance() const;
    // The resolved configuration as the run recorded it in /config.
    std::string config() const;
    // The run's options from /config: its "name = value" lines, with the "  # default" mark
    // that flags defaulted values dropped.
    std::map<std::string, std::string> recorded_options() const;

    // Rows of sequences [first, last), resized to fit. Error (exit 3) when the output lacks
    // the dataset; std::invalid_argument when the sequences are outside [0, N) (for /attention,
    // outside the stored [A, B)).
    void read_output(std::int64_t first, std::int64_t last, std::vector<float>& out) const;
    void read_lse(std::int64_t first, std::int64_t last, std::vector<float>& out) const;
    void read_lengths(std::int64_t first, std::int64_t last, std::vector<std::int32_t>& out) const;
    void read_attention(std::int64_t first, std::int64_t last, std::vector<float>& out) const;  // f16 widened
    void read_attention(std::int64_t first, std::int64_t last, std::vector<std::uint16_t>& out) const;  // f16 bits
    // All of them for sequences [first, last); the attention maps of their stored part, in the dtype stored.
    void read(std::int64_t first, std::int64_t last, OutputRows& rows) const;

private:
    struct Datasets;  // the file and the datasets it has of /output, /lse, /lengths, /attention, /offsets
    std::unique_ptr<Datasets> h5_;
    std::string path_;
    bool complete_ = false;
    bool has_attention_ = false;
    OutputLayout layout_;
};

// The options of a recorded /config text: its "name = value" lines, with the "  # default"
// mark that flags defaulted values dropped.
std::map<std::string, std::string> parse_recorded_options(const std::string& config);

// The recorded options that verify and weights rely on, judged: heads and kv-heads positive
// integers, save-weights none|all|mean, weights-dtype f32|f16 and, when the output holds maps
// (`maps`), their dtype. One line per problem, naming the option, its value and what was
// expected; `inspect` lists them, the readers throw the first (exit 3).
std::vector<std::string> recorded_options_problems(const std::map<std::string, std::string>& options,
                                                   std::optional<WeightsDtype> maps);

}  // namespace attnbatch::io
