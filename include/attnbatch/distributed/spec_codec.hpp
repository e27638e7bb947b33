// InputSpec and projection weights as bytes, so that rank 0 alone validates the input and
// every other rank receives the result (gather mode never needs the files on other ranks).
#pragma once

#include <optional>
#include <string>

#include "attnbatch/distributed/comm.hpp"
#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/io/models/weights_reader.hpp"

namespace attnbatch::distributed {

std::string encode_spec(const io::InputSpec& spec);
io::InputSpec decode_spec(const std::string& bytes);  // std::invalid_argument when damaged

// Collective: root's value reaches every rank.
void broadcast_spec(Comm& comm, io::InputSpec& spec, int root);
void broadcast_weights(Comm& comm, std::optional<io::ProjectionWeights>& weights, int root);

}  // namespace attnbatch::distributed
