// Opening the files a run reads, and their datasets, with errors a user can act on: what is
// wrong, and a hint naming the option.
#pragma once

#include "attnbatch/error.hpp"
#include "attnbatch/io/h5/dataset.hpp"
#include "attnbatch/io/h5/file.hpp"

#include <string>
#include <vector>

namespace attnbatch::io::detail {

// The checks before opening `path` for reading, each failure one line: it exists, is a
// regular file (a FIFO would block the open forever), is readable (Error exit 4) and has
// HDF5's signature (exit 3). `option` is the command-line option that named it ("--input"),
// for the hints; empty when none did (inspect).
void check_readable_hdf5(const std::string& path, const std::string& option);

// Opens an input file read-only after check_readable_hdf5(): a file HDF5 still refuses is
// damaged (exit 3) unless another process holds its lock (exit 4).
File open_input_file(const std::string& path, const std::string& option, const FileAccess& access = {});

// Opens the dataset `path` or throws Error (exit 3) naming `option` and what it should
// hold ("the embeddings [N, L, d]"), listing the file's top-level datasets.
Dataset open_input_dataset(const File& file, const std::string& path, const std::string& option,
                           const std::string& role);

// The message for `path` not being a dataset of `file`: `kind` says what it is instead
// (missing, a group, ...); `available` are the file's top-level datasets, listed as hints.
std::string not_a_dataset(const std::string& file, const std::string& path, ObjectKind kind, const std::string& option,
                          const std::string& role, const std::vector<std::string>& available);

// The H5Error of a failed read as an Error with exit code 4 (the message already names
// file, object, call and HDF5's stack, plus the file-locking hint when that was the cause).
[[noreturn]] void rethrow_read_failure(const std::exception& error);

}  // namespace attnbatch::io::detail
