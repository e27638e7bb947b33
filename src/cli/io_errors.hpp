// The io layer reports failures as io::Error (with the exit code of SPEC.md) or, for a raw
// HDF5 failure nothing above caught, io::H5Error; subcommands report UserError. This is the
// one place that translates.
#pragma once

#include "command_line.hpp"

#include <utility>

namespace attnbatch::cli {

// Call inside a catch block: rethrows io::Error as UserError with its exit code, io::H5Error
// as UserError with exit 4 (a file that cannot be read or written), anything else unchanged.
[[noreturn]] void rethrow_as_user_error();

// Runs `body`, translating io errors as above.
template <class Body>
decltype(auto) with_io_errors(Body&& body) {
    try {
        return std::forward<Body>(body)();
    } catch (...) {
        rethrow_as_user_error();
    }
}

}  // namespace attnbatch::cli
