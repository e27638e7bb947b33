// Path spelling shared by the io sources: HDF5 object paths, file-system directories and names.
#pragma once

#include <sys/stat.h>

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

// Whether anything (a file, a directory, a dangling link) has the name `path`.
inline bool path_exists(const std::string& path) {
    struct stat status {};
    return ::lstat(path.c_str(), &status) == 0;
}

}  // namespace attnbatch::io::detail
