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

bool same_file(const std::string& a, const std::string& b) {
    struct stat first {}, second {};
    const bool a_exists = ::stat(a.c_str(), &first) == 0, b_exists = ::stat(b.c_str(), &second) == 0;
    if (a_exists && b_exists) return first.st_dev == second.st_dev && first.st_ino == second.st_ino;
    if (a_exists != b_exists) return false;
    std::error_code error_a, error_b;
    const std::filesystem::path real_a = std::filesystem::weakly_canonical(std::filesystem::absolute(a, error_a), error_a);
    const std::filesystem::path real_b = std::filesystem::weakly_canonical(std::filesystem::absolute(b, error_b), error_b);
    if (error_a || error_b) return a == b;
    return real_a == real_b;
}

}  // namespace attnbatch::io
