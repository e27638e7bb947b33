// File datatypes, and describing a datatype id (TypeInfo).
#include "attnbatch/io/h5/types.hpp"

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
