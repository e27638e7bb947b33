// Small HDF5 files for tests, written and read back through the io layer.
#pragma once

#include "attnbatch/io/h5/h5.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

namespace attnbatch::testing {

// A dataset holding `values`, which must fill `dims`.
template <class T>
void put(const io::File& file, const std::string& path, const io::Datatype& type, const io::Dims& dims,
         const std::vector<T>& values) {
    ASSERT_EQ(values.size(), io::element_count(dims)) << path;
    const io::Dataset dataset = io::Dataset::create(file, path, type, dims);
    io::write_slab(dataset, io::Slab{}, values.data(), values.size());
}

// A 2-byte float that is neither IEEE binary16 nor bfloat16 (6 exponent bits, 9 mantissa bits):
// what a run refuses where it accepts 16-bit data ("float16(e6m9)").
io::Datatype other_half_width_float();

// 0.25 * (index % 17) - 2: distinct, exact in float32 and float64.
std::vector<float> ramp(std::size_t count);
std::vector<double> ramp64(std::size_t count);

// One dataset of the file at `path`, whole.
template <class T>
std::vector<T> read_dataset(const std::string& path, const std::string& dataset) {
    const io::File file = io::File::open(path, io::FileMode::read_only);
    return io::read_all<T>(io::Dataset::open(file, dataset));
}
io::Dims dataset_dims(const std::string& path, const std::string& dataset);
io::TypeInfo dataset_type(const std::string& path, const std::string& dataset);
bool has_object(const std::string& path, const std::string& object);

}  // namespace attnbatch::testing
