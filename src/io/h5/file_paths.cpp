// Real paths, directories and names.
#include "attnbatch/io/h5/file_paths.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

namespace attnbatch::io {

namespace {

// Where writing to a path ends up: the file itself when it exists, else the directory it would
// be created in and its name there, found by following symbolic links as open(O_CREAT) does,
// so that a dangling link counts as the file it points to.
struct Destination {
    bool exists = false;
    bool directory_known = true;  // false: not even the directory exists; compare `lexical`
    dev_t device = 0;             // of the file, or of its directory when !exists
    ino_t inode = 0;
    std::string name;             // the file's name in that directory when !exists
    std::string lexical;          // the absolute, lexically normal path reached
};

Destination destination_of(std::string path) {
    Destination destination;
    struct stat status {};
    // Each hop of a chain of links; the kernel gives up after 40 as well (ELOOP).
    for (int hop = 0; hop < 40; ++hop) {
        if (::stat(path.c_str(), &status) == 0) {
            destination.exists = true;
            destination.device = status.st_dev;
            destination.inode = status.st_ino;
            return destination;
        }
        if (::lstat(path.c_str(), &status) != 0 || !S_ISLNK(status.st_mode)) break;
        std::error_code error;
        const std::filesystem::path target = std::filesystem::read_symlink(path, error);
        if (error) break;
        path = target.is_absolute() ? target.string() : directory_of(path) + "/" + target.string();
    }
    std::error_code error;
    const std::filesystem::path resolved = std::filesystem::weakly_canonical(std::filesystem::absolute(path, error), error);
    destination.lexical = error ? path : resolved.string();
    const std::size_t slash = path.find_last_of('/');
    destination.name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (::stat(directory_of(path).c_str(), &status) != 0 || destination.name.empty() || destination.name == "." ||
        destination.name == "..") {
        destination.directory_known = false;
        return destination;
    }
    destination.device = status.st_dev;
    destination.inode = status.st_ino;
    return destination;
}

}  // namespace

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
    const Destination first = destination_of(a), second = destination_of(b);
    if (first.exists != second.exists) return false;
    if (!first.directory_known || !second.directory_known) return first.lexical == second.lexical;
    return first.device == second.device && first.inode == second.inode && first.name == second.name;
}

}  // namespace attnbatch::io
