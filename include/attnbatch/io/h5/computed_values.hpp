// Datasets written from values computed on the fly, in bounded memory, so that a file of any
// size is written with the same small memory (the files of `generate` and `import-weights`).
#pragma once

#include "attnbatch/io/h5/dims.hpp"

#include <cstddef>
#include <functional>
#include <string>

namespace attnbatch::io {

// The memory bound of one write unless the caller says otherwise.
inline constexpr std::size_t default_slab_bytes = std::size_t{64} << 20;

// Computes the `count` consecutive values along the last axis that start at multi-index
// `index` of a dataset (one "run"), in double; the writer converts them to the file's type.
using ValueSource = std::function<void(const Dims& index, std::size_t count, double* out)>;

// What was written: for a summary of the file.
struct WrittenDataset {
    std::string path;
    std::string dtype;  // "float32", "float64", "int32", "int64"
    Dims dims;
};

}  // namespace attnbatch::io
