// Real paths, directories and names.
#include "attnbatch/io/h5/file_paths.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

namespace attnbatch::io {

std::string real_path(const std::string& path) {
    if (path.empty()) return path;
    std::error_code error;
    const std::filesystem::path real = std::filesystem::canonical(path, error);
    if (!error) return real.string();
    const std::filesystem::path absolute = std::filesystem::absolute(path, error);
    return error ? path : absolute.lexically_normal().string();
}

std::string directory_of(const std::string& path) {
    const std::size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

bool path_exists(const std::string& path) {
    struct stat status {};
    return ::lstat(path.c_str(), &status) == 0;
}

}  // namespace attnbatch::io
