// File and memory datatypes, and naming a dataset's type for messages.
#include "attnbatch/io/h5/types.hpp"

#include "attnbatch/kernels/bf16.hpp"
#include "attnbatch/kernels/half.hpp"
#include "h5/check.hpp"
#include "h5/type_info_of.hpp"

namespace attnbatch::io {
namespace {
const Where nowhere{"(datatype)", ""};
}

Datatype Datatype::copy_of(hid_t type) {
    detail::quiet_hdf5_errors();
    return Datatype(H5_CALL(H5Tcopy, nowhere, type));
}

Datatype Datatype::adopt(hid_t owned) { return Datatype(owned); }

Datatype Datatype::float32() { return copy_of(H5T_IEEE_F32LE); }
Datatype Datatype::float64() { return copy_of(H5T_IEEE_F64LE); }
Datatype Datatype::int32() { return copy_of(H5T_STD_I32LE); }
Datatype Datatype::int64() { return copy_of(H5T_STD_I64LE); }

// IEEE binary16 derived from binary32: sign at bit 15, 5 exponent bits at 10, 10 mantissa
// bits at 0, bias 15. The fields shrink before the size does, as HDF5 requires.
Datatype Datatype::float16() {
    Datatype type = copy_of(H5T_IEEE_F32LE);
    H5_CALL(H5Tset_fields, nowhere, type.id(), 15, 10, 5, 0, 10);
    H5_CALL(H5Tset_size, nowhere, type.id(), 2);
    H5_CALL(H5Tset_ebias, nowhere, type.id(), 15);
    return type;
}

// The same from binary32 with a 7-bit mantissa: sign 15, exponent 8 bits at 7, bias 127.
Datatype Datatype::bfloat16() {
    Datatype type = copy_of(H5T_IEEE_F32LE);
    H5_CALL(H5Tset_fields, nowhere, type.id(), 15, 7, 8, 0, 7);
    H5_CALL(H5Tset_size, nowhere, type.id(), 2);
    return type;  // the bias stays binary32's 127
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

namespace detail {

TypeInfo type_info_of(hid_t type, const Where& where) {
    TypeInfo info;
    info.size = H5_CALL(H5Tget_size, where, type);
    switch (H5_CALL(H5Tget_class, where, type)) {
        case H5T_INTEGER:
            info.type_class = TypeClass::integer;
            info.is_signed = H5_CALL(H5Tget_sign, where, type) == H5T_SGN_2;
            break;
        case H5T_FLOAT: {
            info.type_class = TypeClass::floating;
            std::size_t sign = 0, exponent_position = 0, exponent_size = 0, mantissa_position = 0, mantissa_size = 0;
            H5_CALL(H5Tget_fields, where, type, &sign, &exponent_position, &exponent_size, &mantissa_position, &mantissa_size);
            info.exponent_bits = static_cast<int>(exponent_size);
            info.mantissa_bits = static_cast<int>(mantissa_size);
            break;
        }
        case H5T_STRING: info.type_class = TypeClass::string; break;
        default: info.type_class = TypeClass::other; break;
    }
    return info;
}

}  // namespace detail
}  // namespace attnbatch::io
