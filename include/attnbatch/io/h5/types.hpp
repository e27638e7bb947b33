// Datatypes: the file types we write (little-endian IEEE and two's complement, plus IEEE
// binary16 and bfloat16). The memory types and type descriptions are type_info.hpp's.
#pragma once

#include "attnbatch/io/h5/handle.hpp"
#include "attnbatch/io/h5/type_info.hpp"

namespace attnbatch::io {

// An owned datatype (always a copy, never a predefined id, so closing it is always right).
class Datatype {
public:
    static Datatype float16();  // IEEE binary16; h5py reads it as numpy float16
    // bfloat16: binary32's sign and 8-bit exponent (bias 127) with a 7-bit mantissa, 2 bytes.
    // No HDF5 or h5py name exists for it; a dataset of this layout is read as bfloat16.
    static Datatype bfloat16();
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

}  // namespace attnbatch::io
