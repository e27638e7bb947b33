// The memory types callers read and write, and a description of a dataset's type good enough
// for validation messages ("float64", "int32", "float16"), without hdf5.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

namespace attnbatch::io {

// Layouts of caller memory. f16_bits: uint16_t holding IEEE binary16 bit patterns, moved
// without arithmetic conversion when the file type is float16 too; bf16_bits the same for
// bfloat16 (HDF5's own conversions of 16-bit floats run at about 20 MB/s: read the bits, widen
// them here).
enum class MemType { f32, f64, i32, i64, f16_bits, bf16_bits };

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

// Bits of f16_bits or bf16_bits widened to float, exactly (every 16-bit value is a float).
void widen_half_width(MemType type, const std::uint16_t* bits, float* out, std::size_t count);

// The element type of stored float data. float16 (IEEE binary16) and bfloat16 (a 2-byte HDF5
// float with 8 exponent and 7 mantissa bits, bias 127) data is read as its bits and widened
// to float32 exactly.
enum class DataType { float32, float64, float16, bfloat16 };

const char* name_of(DataType type);  // "float32", "float64", "float16", "bfloat16"

enum class TypeClass { integer, floating, string, other };

struct TypeInfo {
    TypeClass type_class = TypeClass::other;
    std::size_t size = 0;    // bytes
    bool is_signed = false;  // integers only
    int exponent_bits = 0, mantissa_bits = 0;  // floats only
    // "float32", "uint8", "float16", "bfloat16", "string", "other(12 bytes)"; a float of another
    // layout: "float16(e6m9)"
    std::string name() const;
    // For 16-bit floats of IEEE binary16 or bfloat16 layout: the bits memory type that reads them
    // unconverted; otherwise none.
    std::optional<MemType> half_width_bits() const;
    // IEEE binary32: read as float, every value is the one read as double.
    bool is_binary32() const noexcept {
        return type_class == TypeClass::floating && size == 4 && exponent_bits == 8 && mantissa_bits == 23;
    }
};

}  // namespace attnbatch::io
