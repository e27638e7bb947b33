// Datatypes: the file types we write (little-endian IEEE and two's complement, plus IEEE
// binary16), the memory types callers read and write, and a description of a dataset's type
// good enough for validation messages ("float64", "int32", "float16").
#pragma once

#include "attnbatch/io/h5_handle.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace attnbatch::io {

// An owned datatype (always a copy, never a predefined id, so closing it is always right).
class Datatype {
public:
    static Datatype float16();  // IEEE binary16; h5py reads it as numpy float16
    static Datatype float32();
    static Datatype float64();
    static Datatype int32();
    static Datatype int64();
    static Datatype copy_of(hid_t type);  // e.g. of a predefined H5T_* id
    static Datatype adopt(hid_t owned);   // takes ownership of an id a C call returned

    hid_t id() const noexcept { return handle_.id(); }

private:
    explicit Datatype(hid_t id) : handle_(id) {}
    DatatypeHandle handle_;
};

// Layouts of caller memory. f16_bits: uint16_t holding IEEE binary16 bit patterns, moved
// without arithmetic conversion when the file type is float16 too.
enum class MemType { f32, f64, i32, i64, f16_bits };

template <class T>
constexpr MemType mem_type_of() {
    if constexpr (std::is_same_v<T, float>) return MemType::f32;
    else if constexpr (std::is_same_v<T, double>) return MemType::f64;
    else if constexpr (std::is_same_v<T, std::int32_t>) return MemType::i32;
    else if constexpr (std::is_same_v<T, std::int64_t>) return MemType::i64;
    else if constexpr (std::is_same_v<T, std::uint16_t>) return MemType::f16_bits;
    else static_assert(!sizeof(T), "memory type must be float, double, int32_t, int64_t or uint16_t (half bits)");
}

std::size_t mem_type_size(MemType type) noexcept;

enum class TypeClass { integer, floating, string, other };

struct TypeInfo {
    TypeClass type_class = TypeClass::other;
    std::size_t size = 0;    // bytes
    bool is_signed = false;  // integers only
    std::string name() const;  // "float32", "uint8", "float16", "string", "other(12 bytes)"
};

}  // namespace attnbatch::io
