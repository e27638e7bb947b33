// The fingerprint of projection weights' values: a run records it in its journal identity
// ("weights xxh3"), so that a resume, and `weights` recomputing maps later, can tell the
// weights the run used from another file of the same shapes.
#pragma once

#include <string>

#include "attnbatch/io/models/weights_reader.hpp"

namespace attnbatch::io {

// XXH3-64 (16 hex digits) of the XXH3 of each of w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o as
// float32 (an absent one hashes as empty): the same weights give the same text whatever file
// or dtype they were read from.
std::string weights_hash(const ProjectionWeights& weights);

}  // namespace attnbatch::io
