// The one checked path every HDF5 C call goes through. H5_CALL(H5Dopen2, where, args...)
// stringizes the function itself, so the name in an error message can never drift from the
// call that failed. Failure is the C API's own convention: a negative id/herr_t/htri_t/ssize_t,
// zero for the size_t returns (H5Tget_size), null for pointers.
#pragma once

#include "attnbatch/io/h5/error.hpp"

#include <hdf5.h>

#include <type_traits>

namespace attnbatch::io::detail {

// Makes HDF5 stop printing its error stack to stderr (we carry it in H5Error instead).
// Idempotent and cheap; called by every entry point that may be the first HDF5 use.
void quiet_hdf5_errors();

// Copies HDF5's current error stack into an H5Error and throws it.
[[noreturn]] void throw_h5_error(const char* call, const Where& where);

template <class R>
R checked(R result, const char* call, const Where& where) {
    bool failed;
    if constexpr (std::is_pointer_v<R>) {
        failed = result == nullptr;
    } else if constexpr (std::is_unsigned_v<R>) {
        failed = result == 0;
    } else {
        failed = static_cast<long long>(result) < 0;
    }
    if (failed) throw_h5_error(call, where);
    return result;
}

}  // namespace attnbatch::io::detail

#define H5_CALL(function, where, ...) ::attnbatch::io::detail::checked(function(__VA_ARGS__), #function, where)
