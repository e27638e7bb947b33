// The dataset names an input file gives a meaning of their own, so that a writer asked to put
// the embeddings under one of them can refuse: `run` would read that dataset as what its name
// says (or not find the embeddings at all).
#pragma once

#include <string>

namespace attnbatch::io {

// What the input schema means by the absolute dataset path `path` in a file of the padded
// (`packed` false) or packed layout, e.g. "the sequence lengths (integer [N])"; "" when the
// schema leaves the name free for the embeddings.
std::string input_schema_meaning(const std::string& path, bool packed);

}  // namespace attnbatch::io
