// Shared by the io tests: a scratch directory per test, small HDF5 writers, and running the
// system Python with h5py to check that other readers see what we wrote.
#pragma once

#include "attnbatch/io/h5.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace attnbatch::io::testing {

class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

template <class T>
void put(const File& file, const std::string& path, const Datatype& type, const Dims& dims, const std::vector<T>& values) {
    const Dataset dataset = Dataset::create(file, path, type, dims);
    write_slab(dataset, Slab{}, values.data(), values.size());
}

// 0.25 * (index % 17) - 2: distinct, exact in float32 and float64.
std::vector<float> ramp(std::size_t count);
std::vector<double> ramp64(std::size_t count);

std::string read_text(const std::string& path);
void write_text(const std::string& path, const std::string& text);

struct PythonResult {
    int status = -1;
    std::string output;  // stdout and stderr
};

bool h5py_available();
// Runs `script` with `args` as sys.argv[1:].
PythonResult run_python(const std::string& script, const std::vector<std::string>& args);

}  // namespace attnbatch::io::testing
