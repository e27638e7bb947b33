// Shared by the cli tests: running the attnbatch binary and capturing what a user would see,
// scratch directories, file digests, and the system Python with h5py.
#pragma once

#include "attnbatch/io/h5.hpp"
#include "io/test_support.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace attnbatch::cli::testing {

// One scratch-directory type for every test layer.
using io::testing::TempDir;

struct Outcome {
    int status = -1;  // the exit code; -1 when killed by a signal
    std::string out;
    std::string err;
};

// Runs `attnbatch args...` with the environment plus `env`, and no ATTNBATCH_* variable of
// the caller's (a developer's shell must not change the results).
Outcome attnbatch(const std::vector<std::string>& args, const std::vector<std::pair<std::string, std::string>>& env = {});

bool exists(const std::string& path);
std::string digest(const std::string& path);  // of the file's bytes; "" when unreadable
void write_text(const std::string& path, const std::string& text);
std::size_t line_count(const std::string& text);

template <class T>
std::vector<T> read_dataset(const std::string& path, const std::string& dataset) {
    const io::File file = io::File::open(path, io::FileMode::read_only);
    return io::read_all<T>(io::Dataset::open(file, dataset));
}
io::Dims dataset_dims(const std::string& path, const std::string& dataset);
io::TypeInfo dataset_type(const std::string& path, const std::string& dataset);
bool has_object(const std::string& path, const std::string& object);

bool h5py_available();
// Runs `script` with `args` as sys.argv[1:]; stdout and stderr together.
Outcome python(const std::string& script, const std::vector<std::string>& args);

}  // namespace attnbatch::cli::testing
