// What a resumed run must share with the run that wrote OUTPUT.partial for the two to make
// one bit-identical output: the input (files, datasets, shapes, lengths, weights) and every
// option that changes a result bit. Ranks, threads, --io, --schedule and --max-memory do not
// (docs/formats.md guarantees it), so they may change between attempts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnbatch/distributed/step_computer.hpp"
#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/io/models/weights_reader.hpp"
#include "attnbatch/io/output/output_file.hpp"

namespace attnbatch::distributed {

// "key = value" lines (io/output/journal.hpp). Input files are named by their real path, size and
// modification time: rewriting an input in place between attempts changes its identity.
std::string job_identity(const io::InputSpec& spec, const std::optional<io::ProjectionWeights>& weights,
                            const std::vector<std::int32_t>& lengths, const AttentionSettings& settings,
                            const io::OutputLayout& layout);

}  // namespace attnbatch::distributed
