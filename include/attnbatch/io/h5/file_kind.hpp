// Which of attnbatch's files a schema looks like, from its content alone: the datasets it
// holds first, then the root attribute `format`.
#pragma once

#include "attnbatch/io/h5/file_schema.hpp"

namespace attnbatch::io {

enum class FileKind { unknown, input, output, weights, attention_maps };

const char* name_of(FileKind kind);  // "input", "output", "weights", "attention-maps", "unknown"

// output: /output or /lse; input: /embeddings, or /query /key /value together; then
// `format`; weights: any of /w_q /w_k /w_v; attention maps (of `weights --to`): /attention
// alone; otherwise unknown.
FileKind kind_of(const FileSchema& schema);

}  // namespace attnbatch::io
