// One .npy file (numpy's format: the magic "\x93NUMPY", version 1.0, 2.0 or 3.0, a little-endian
// header length, a Python-literal dict {'descr': ..., 'fortran_order': ..., 'shape': (...)},
// then the array's bytes in C order), read by hand: Debian 12 packages no maintained C/C++
// .npy reader (no libnpy, no cnpy; xtensor's xnpy.hpp loads whole arrays into memory), and
// the format is small enough that a strict parser here is shorter than a dependency and can
// map the bytes in place.
//
// The parser is strict on purpose: exactly the three keys numpy writes, once each; a dtype
// of one of the kinds below; C order; a file of exactly header + data bytes. Anything else
// (Fortran order, object arrays, which numpy stores as a pickle, structured dtypes, pickles or
// .npz archives named .npy, a truncated file) is refused with one line naming the file.
#pragma once

#include "attnbatch/error.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace attnbatch::io {

enum class NpyKind { floating, signed_integer, unsigned_integer };

struct NpyHeader {
    std::string path;
    std::string descr;          // as written, e.g. "<f4"
    NpyKind kind = NpyKind::floating;
    std::size_t item_bytes = 0;
    bool big_endian = false;    // '>' (converted while reading)
    std::vector<std::int64_t> shape;
    std::int64_t data_offset = 0;  // where the array's bytes start
    std::int64_t file_bytes = 0;

    std::int64_t elements() const;
    std::string shape_text() const;  // "[3, 4, 5]"
    std::string dtype_name() const;  // "float32", "int64", ...
};

// Reads and checks the header of `path`; `role` names the file in messages ("shard",
// "--lengths"). Error: exit 4 when the file cannot be opened or read, exit 3 for anything
// that is not a C-order numeric .npy array whose size matches its header.
NpyHeader read_npy_header(const std::string& path, const std::string& role);

// A whole .npy file mapped read-only: the data are read where they lie, never copied to a
// file of their own.
class MappedNpy {
public:
    explicit MappedNpy(const NpyHeader& header);
    MappedNpy(MappedNpy&&) noexcept;
    MappedNpy& operator=(MappedNpy&&) noexcept;
    MappedNpy(const MappedNpy&) = delete;
    MappedNpy& operator=(const MappedNpy&) = delete;
    ~MappedNpy();

    const unsigned char* data() const noexcept { return data_; }
    const NpyHeader& header() const noexcept { return header_; }

private:
    void release() noexcept;
    NpyHeader header_;
    void* base_ = nullptr;
    std::size_t length_ = 0;
    const unsigned char* data_ = nullptr;
};

// Element `i` of an integer array, widened to int64 (unsigned values above INT64_MAX saturate).
std::int64_t npy_integer_at(const NpyHeader& header, const unsigned char* data, std::int64_t i);

// `count` floating elements from `data` into float32 (float64 rounded to nearest, float16
// widened, big-endian swapped).
void npy_floats_to_f32(const NpyHeader& header, const unsigned char* data, std::size_t count, float* out);

// The value of element `i` of a floating array, in double (for messages and range checks).
double npy_float_at(const NpyHeader& header, const unsigned char* data, std::int64_t i);

// Every element of a 1-D integer .npy file (a sidecar), widened to int64.
std::vector<std::int64_t> read_npy_integers(const NpyHeader& header);

}  // namespace attnbatch::io
