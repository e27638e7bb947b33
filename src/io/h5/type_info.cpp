// Memory types and the description of a stored type.
#include "attnbatch/io/h5/type_info.hpp"

#include "attnbatch/kernels/bf16.hpp"
#include "attnbatch/kernels/half.hpp"

namespace attnbatch::io {

const char* name_of(DataType type) {
    switch (type) {
        case DataType::float64: return "float64";
        case DataType::float16: return "float16";
        case DataType::bfloat16: return "bfloat16";
        case DataType::float32: break;
    }
    return "float32";
}

std::size_t mem_type_size(MemType type) noexcept {
    switch (type) {
        case MemType::f32: return 4;
        case MemType::f64: return 8;
        case MemType::i32: return 4;
        case MemType::i64: return 8;
        case MemType::f16_bits: return 2;
        case MemType::bf16_bits: return 2;
    }
    return 0;
}

std::string TypeInfo::name() const {
    const std::string bits = std::to_string(size * 8);
    switch (type_class) {
        case TypeClass::integer: return (is_signed ? "int" : "uint") + bits;
        case TypeClass::floating:
            if (size != 2 || half_width_bits()) return half_width_bits() == MemType::bf16_bits ? "bfloat16" : "float" + bits;
            return "float16(e" + std::to_string(exponent_bits) + "m" + std::to_string(mantissa_bits) + ")";
        case TypeClass::string: return "string";
        case TypeClass::other: break;
    }
    return "other(" + std::to_string(size) + " bytes)";
}

std::optional<MemType> TypeInfo::half_width_bits() const {
    if (type_class != TypeClass::floating || size != 2) return std::nullopt;
    if (exponent_bits == 5 && mantissa_bits == 10) return MemType::f16_bits;
    if (exponent_bits == 8 && mantissa_bits == 7) return MemType::bf16_bits;
    return std::nullopt;
}

void widen_half_width(MemType type, const std::uint16_t* bits, float* out, std::size_t count) {
    if (type == MemType::bf16_bits) {
        for (std::size_t i = 0; i < count; ++i) out[i] = kernels::bf16_to_float(bits[i]);
    } else {
        for (std::size_t i = 0; i < count; ++i) out[i] = kernels::half_to_float(bits[i]);
    }
}

}  // namespace attnbatch::io
