// Output size estimates and free space.
#include "attnbatch/io/output/output_size.hpp"

#include "attnbatch/io/h5/file_paths.hpp"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>

namespace attnbatch::io {

OutputSizes estimate_output_bytes(const OutputLayout& layout) {
    const auto n = static_cast<std::uint64_t>(layout.n);
    const auto len = static_cast<std::uint64_t>(layout.len);
    const auto heads = static_cast<std::uint64_t>(layout.heads);
    OutputSizes sizes;
    const auto rows = static_cast<std::uint64_t>(layout.tokens());  // N * L when padded
    sizes.output = rows * static_cast<std::uint64_t>(layout.d_out) * 4;
    sizes.lse = heads * rows * 4;
    sizes.lengths = n * 4;
    if (layout.packed) sizes.offsets = (n + 1) * 8;
    sizes.attention = static_cast<std::uint64_t>(layout.weights_count()) *
                      static_cast<std::uint64_t>(layout.weights_heads()) * len * len * layout.weights_element_bytes();
    return sizes;
}

std::uint64_t free_bytes_at(const std::string& path) {
    // The output does not exist yet: ask about the directory that will hold it.
    std::string where = path;
    struct stat status {};
    if (::stat(where.c_str(), &status) != 0 || !S_ISDIR(status.st_mode)) {
        where = directory_of(where);
    }
    struct statvfs info {};
    if (::statvfs(where.c_str(), &info) != 0) {
        throw Error(exit_io, where + ": cannot query free space: " + std::strerror(errno));
    }
    return static_cast<std::uint64_t>(info.f_bavail) * static_cast<std::uint64_t>(info.f_frsize);
}

}  // namespace attnbatch::io
