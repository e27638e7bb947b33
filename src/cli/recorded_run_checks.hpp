// Checks that a finished run's output belongs to the files `verify` and `weights` recompute it
// from: a recomputation against another input (or weights) gives numbers, just wrong ones, so
// these refuse before any is computed. Each Error (exit 3) is one line naming what differs.
#pragma once

#include <string>
#include <vector>

#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/io/output/output_reader.hpp"
#include "recorded_run.hpp"

namespace attnbatch::cli {

// The shape the output records (root attributes heads, kv_heads, d_k, d_v; the datasets' H,
// L and D_out) is the one of the input and weights read now.
void check_recorded_shape(const io::OutputReader& output, const RecordedRun& run);

// The projection weights read now are the run's by value: the XXH3 its journal identity
// records ("weights xxh3") is theirs, and a run that recorded none ("weights = (none)") gets
// none. An output without an identity, or one recorded before the hash was, is taken as it is.
void check_recorded_weights(const io::OutputReader& output, const RecordedRun& run);

// /lengths is an integer [N] dataset equal to the lengths of the input sequences the output
// holds (all of them: one small read).
void check_output_lengths(const io::OutputReader& output, const RecordedRun& run, io::InputReader& reader);

}  // namespace attnbatch::cli
