// Path spelling shared by the io sources: HDF5 object paths and file-system directories.
#pragma once

#include <string>

namespace attnbatch::io::detail {

// "x" and "/x" name the same object: object paths are always taken from the root.
inline std::string absolute_object_path(const std::string& path) {
    return path.empty() || path[0] != '/' ? "/" + path : path;
}

// The directory holding `path` ("." for a bare file name).
inline std::string directory_of(const std::string& path) {
    const std::size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace attnbatch::io::detail
