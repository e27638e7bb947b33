// Describing a datatype id, shared by datasets and by the schema walk of attributes.
#pragma once

#include "attnbatch/io/h5/error.hpp"
#include "attnbatch/io/h5/types.hpp"

namespace attnbatch::io::detail {

TypeInfo type_info_of(hid_t type, const Where& where);

}  // namespace attnbatch::io::detail
