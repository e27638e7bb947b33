// Reading and writing one UTF-8 string through a dataset or an attribute: the two differ
// only in the read/write call, which the caller passes in.
#pragma once

#include "attnbatch/io/h5/error.hpp"
#include "attnbatch/io/h5/handle.hpp"

#include <functional>
#include <string>

namespace attnbatch::io::detail {

// A variable-length UTF-8 string type, the kind h5py returns as `str`.
DatatypeHandle utf8_string_type(const Where& where);

// `file_type` is the stored type; `read(mem_type, buffer)` performs H5Dread or H5Aread.
std::string read_string(hid_t file_type, hid_t space, const std::function<herr_t(hid_t, void*)>& read,
                        const char* call, const Where& where);

}  // namespace attnbatch::io::detail
