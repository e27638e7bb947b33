// The output file of a run, exactly as SPEC.md "Output file" describes it:
//   /output     float32 [N, L, D_out]                      labels N, L, D
//   /attention  float32 or float16 [B-A, H, L, L]           labels N, H, L_q, L_k
//               ([B-A, 1, L, L] for the mean over heads; attribute first_sequence = A)
//   /lse        float32 [N, H, L]                           labels N, H, L
//   /lengths    int32 [N]                                   label N
//   /config     scalar UTF-8 string: the full resolved configuration
// plus root attributes for provenance and `complete`, 0 until finalize() sets it to 1.
//
// The file is written as OUTPUT.partial and renamed to OUTPUT only once complete, so a file
// named OUTPUT is always whole; an existing OUTPUT is replaced (with force) only by that
// final rename, never deleted before.
//
// Progress for resuming is the journal (journal.hpp): units are recorded as done, with a
// checksum, by checkpoint() once their data is flushed. /lengths is also filled with -1 and
// /lse with NaN at creation, so a reader sees unwritten sequences as such.
#pragma once

#include "attnbatch/io/chunking.hpp"
#include "attnbatch/error.hpp"
#include "attnbatch/io/h5_dataset.hpp"
#include "attnbatch/io/h5_file.hpp"
#include "attnbatch/io/input.hpp"
#include "attnbatch/io/journal.hpp"

#include <cstdint>
#include <optional>
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
    std::int64_t weights_first = 0;  // A: first sequence with stored weights
    std::int64_t weights_last = -1;  // B (exclusive); -1: N
    int gzip_level = 0;              // 0: no compression; 1-9: shuffle + deflate
    std::size_t chunk_bytes = default_chunk_bytes;

    std::int64_t weights_end() const noexcept { return weights_last < 0 ? n : weights_last; }
    std::int64_t weights_heads() const noexcept { return save_weights == SaveWeights::mean ? 1 : heads; }
    std::int64_t weights_count() const noexcept {  // N_w = B - A; 0 without weights
        return save_weights == SaveWeights::none ? 0 : weights_end() - weights_first;
    }
    // The stored-weights part of sequences [first, last): [max(first, A), min(last, B)),
    // empty (first == second) when they do not meet.
    std::pair<std::int64_t, std::int64_t> weights_range(std::int64_t first, std::int64_t last) const noexcept;
};

// N, L, H and D_out from a validated input; every other field keeps its default.
OutputLayout output_layout_for(const InputSpec& spec);

// Recorded as root attributes (and /config); the CLI fills it. Under MPI-IO every rank must
// pass identical values (attribute writes are collective): set creation_time on one rank and
// broadcast it rather than letting each rank read its own clock.
// Now, as ISO 8601 UTC; SOURCE_DATE_EPOCH (reproducible-builds.org), when set, pins it so
// that two runs can make byte-identical files.
std::string creation_time_now();

struct Provenance {
    std::string version;
    std::string creation_time;  // empty: creation_time_now()
    std::string input_file;
    std::string input_dataset;  // "/embeddings", or "/q,/k,/v" for Q/K/V input
    std::int64_t heads = 0;
    bool causal = false;
    double scale = 0.0;
    std::int64_t ranks = 1;
    std::int64_t threads = 1;
    std::string io_mode = "gather";
    std::string config;  // the full resolved configuration text
};

struct OutputOptions {
    bool force = false;  // replace an existing OUTPUT at the final rename; discard a stale .partial
    FileAccess access;
    // The caller already ran prepare_output_path(). Under MPI one rank must do that before
    // the collective create: a rank still checking would otherwise see the new .partial.
    bool paths_prepared = false;
    // The units the run will record as done (see journal.hpp); without it no journal is
    // written and checkpoint() only flushes.
    std::optional<JournalPlan> journal;
};

// The checks and clean-up before creating OUTPUT.partial: Error with exit 2 when
// OUTPUT exists (without force) or a .partial is left from an interrupted run (without force;
// with force it is removed), exit 4 when the directory does not exist or the stale file
// cannot be removed.
void prepare_output_path(const std::string& output_path, bool force);

// One block of whole sequences [first, last) for write_block(). The attention pointer that
// matches the layout's dtype holds only the sequences of layout.weights_range(first, last),
// (count_w, H_w, L, L); it may be null when that range is empty.
struct OutputBlock {
    const float* output = nullptr;             // (count, L, D_out)
    const float* lse = nullptr;                // (count, H, L)
    const std::int32_t* lengths = nullptr;     // (count)
    const float* attention_f32 = nullptr;      // (count_w, H_w, L, L)
    const std::uint16_t* attention_f16 = nullptr;  // (count_w, H_w, L, L), IEEE binary16 bits
};

class OutputFile {
public:
    static std::string partial_path_for(const std::string& output_path);  // OUTPUT + ".partial"

    // Creates OUTPUT.partial with every dataset, label and attribute (complete = 0) and
    // flushes it. Error: exit 2 when OUTPUT (or a stale .partial) exists without
    // force or the layout is unusable; exit 4 when the file cannot be created.
    static OutputFile create(const std::string& output_path, const OutputLayout& layout,
                             const Provenance& provenance, const OutputOptions& options = {});
    // Opens OUTPUT.partial read-write to go on with it (--resume); the layout must be the
    // one it was created with (the journal's identity says so). Collective under MPI-IO.
    // Error exit 4 when it cannot be opened or has no journal.
    static OutputFile reopen(const std::string& output_path, const OutputLayout& layout,
                             const FileAccess& access = {});

    const OutputLayout& layout() const noexcept { return layout_; }
    const std::string& path() const noexcept { return path_; }  // the final OUTPUT
    std::string partial_path() const { return partial_path_for(path_); }
    // Sequences per /output chunk: work units that are multiples of it write whole chunks.
    std::int64_t sequences_per_chunk() const noexcept { return sequences_per_chunk_; }
    File& file() noexcept { return file_; }

    // Writes sequences [first, last) of every dataset (lengths last). Collective under
    // MPI-IO: every rank calls it the same number of times, with an empty range if need be.
    // With a journal, [first, last) must be whole units; their checksums wait for checkpoint().
    void write_block(std::int64_t first, std::int64_t last, const OutputBlock& block, hid_t transfer = H5P_DEFAULT);

    void flush();
    // Flush, record the units written since the last checkpoint as done, flush again.
    // Collective under MPI-IO (every rank, the same number of times).
    void checkpoint(hid_t transfer = H5P_DEFAULT);
    // The journal as stored (serial: reads with the default transfer).
    JournalState journal_state() const;
    // The units marked done whose data no longer match their checksum, read back unit by
    // unit (memory: one unit's data); only units [first_unit, last_unit) when given, so that
    // a caller can check a large file in slices.
    std::vector<std::int64_t> units_failing_checksum(const JournalState& state, std::size_t first_unit = 0,
                                                     std::size_t last_unit = SIZE_MAX) const;
    // complete = 1, flush, close every object and the file. Collective under MPI-IO.
    void close_complete();
    // Flush and close, complete stays 0: the end of a failed or interrupted run, called on
    // purpose (collective under MPI-IO) rather than left to the destructor.
    void close_incomplete();
    // close_complete(), then publish_output(): the serial end of a run.
    void finalize();

private:
    OutputFile() = default;
    OutputLayout layout_;
    std::string path_;
    bool force_ = false;
    std::int64_t sequences_per_chunk_ = 1;
    void create_journal(const JournalPlan& plan);
    void remember_checksums(std::int64_t first, std::int64_t last, const OutputBlock& block);
    void open_journal();
    File file_;
    std::optional<Dataset> output_, attention_, lse_, lengths_;
    std::optional<Dataset> journal_progress_;
    std::vector<std::int64_t> unit_bounds_;
    std::vector<std::pair<std::int64_t, std::int64_t>> pending_;  // (unit, checksum) written, not yet recorded
};

// The identity recorded in a partial output's journal (journal.hpp), read without opening
// anything else. Error exit 4 when the file cannot be read or has no journal.
std::string read_journal_identity(const std::string& partial_path);

// fsync OUTPUT.partial, rename it to OUTPUT (replacing an existing OUTPUT only with force),
// fsync the directory. Under MPI only one rank calls it, after close_complete().
void publish_output(const std::string& output_path, bool force);

}  // namespace attnbatch::io
