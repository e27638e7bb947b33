// HDF5 object paths as the io sources spell them.
#pragma once

#include <string>

namespace attnbatch::io::detail {

// "x" and "/x" name the same object: object paths are always taken from the root.
inline std::string absolute_object_path(const std::string& path) {
    return path.empty() || path[0] != '/' ? "/" + path : path;
}

}  // namespace attnbatch::io::detail
