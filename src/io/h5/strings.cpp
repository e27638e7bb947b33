// Scalar strings, variable or fixed length, stored by us or by h5py.
#include "h5/strings.hpp"

#include "h5/check.hpp"
#include "h5/compat.hpp"
#include "h5/type_info_of.hpp"

#include "attnbatch/io/h5/attribute.hpp"

#include <stdexcept>
#include <vector>

namespace attnbatch::io::detail {

DatatypeHandle utf8_string_type(const Where& where) {
    DatatypeHandle type(H5_CALL(H5Tcopy, where, H5T_C_S1));
    H5_CALL(H5Tset_size, where, type.id(), H5T_VARIABLE);
    H5_CALL(H5Tset_cset, where, type.id(), H5T_CSET_UTF8);
    return type;
}

std::string read_string(hid_t file_type, hid_t space, const std::function<herr_t(hid_t, void*)>& read,
                        const char* call, const Where& where) {
    // What a file stores is user data: another type is the file's fault (exit 3), not a bug.
    const hssize_t points = H5_CALL(H5Sget_simple_extent_npoints, where, space);
    if (H5_CALL(H5Tget_class, where, file_type) != H5T_STRING || points != 1) {
        const int rank = H5_CALL(H5Sget_simple_extent_ndims, where, space);
        std::vector<hsize_t> extents(static_cast<std::size_t>(rank));
        if (rank > 0) H5_CALL(H5Sget_simple_extent_dims, where, space, extents.data(), nullptr);
        const std::string type = type_info_of(file_type, where).name();
        throw Error(exit_invalid_input, where.file + ": " + where.object + " is " +
                                            (points == 0 ? "an empty " + type : attribute_type_text(type, dims_of(extents))) +
                                            ", expected a scalar string");
    }
    // The memory type copies the stored one: HDF5 will not convert between ASCII and UTF-8
    // character sets, and padding and size then need no conversion either.
    const DatatypeHandle mem_type(H5_CALL(H5Tcopy, where, file_type));
    if (H5_CALL(H5Tis_variable_str, where, file_type) > 0) {
        char* text = nullptr;
        if (read(mem_type.id(), &text) < 0) throw_h5_error(call, where);
        std::string value = text ? text : "";
        checked(reclaim_vlen(mem_type.id(), space, &text), reclaim_vlen_call, where);
        return value;
    }
    const std::size_t size = H5_CALL(H5Tget_size, where, file_type);
    std::vector<char> buffer(size + 1, '\0');
    if (read(mem_type.id(), buffer.data()) < 0) throw_h5_error(call, where);
    return std::string(buffer.data());  // null-terminated or null-padded: stop at the first NUL
}

}  // namespace attnbatch::io::detail
