// Opening input files and datasets with user-facing errors, shared by validation and reading.
#pragma once

#include "attnbatch/error.hpp"
#include "attnbatch/io/h5/dataset.hpp"
#include "attnbatch/io/h5/file.hpp"

#include <string>

namespace attnbatch::io::detail {

// Opens `path` read-only after checking it exists, is readable and is HDF5. `option` is the
// command-line option that named it ("--input", "--weights"), for the hint.
File open_input_file(const std::string& path, const std::string& option, const FileAccess& access = {});

// Opens the dataset `path` or throws Error (exit 3) naming `option` and what it should
// hold ("the embeddings [N, L, d]"), listing the file's top-level datasets.
Dataset open_input_dataset(const File& file, const std::string& path, const std::string& option,
                           const std::string& role);

// The H5Error of a failed read as an Error with exit code 4 (the message already names
// file, object, call and HDF5's stack, plus the file-locking hint when that was the cause).
[[noreturn]] void rethrow_read_failure(const std::exception& error);

}  // namespace attnbatch::io::detail
