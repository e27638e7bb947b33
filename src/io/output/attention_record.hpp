// kernels::AttentionSpec as the output's root attributes, under the names of
// attention_fields.hpp. Internal to io: the public face is Provenance::attention.
#pragma once

#include <string>

#include "attnbatch/io/h5/attribute.hpp"
#include "attnbatch/kernels/attention_spec.hpp"

namespace attnbatch::io {

void write_attention_attributes(ObjectRef object, const kernels::AttentionSpec& spec);

// An attribute that is absent keeps its default: outputs of versions before rotary embeddings
// have no rope_theta, before bf16 no precision. A precision other than fp32 or bf16 is an
// Error (exit 3) naming `path`.
kernels::AttentionSpec read_attention_attributes(ObjectRef object, const std::string& path);

}  // namespace attnbatch::io
