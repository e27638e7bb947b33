// Checking where a new file goes, and the .partial it is written as until it is whole.
#include "attnbatch/io/output/staged_file.hpp"

#include "attnbatch/io/h5/file.hpp"
#include "attnbatch/io/output/output_file.hpp"
#include "attnbatch/io/output/output_size.hpp"
#include "h5/paths.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace attnbatch::io {
namespace {

[[noreturn]] void usage(const std::string& message) { throw Error(exit_usage, message); }

bool path_exists(const std::string& path) {
    struct stat status {};
    return ::lstat(path.c_str(), &status) == 0;
}

}  // namespace

void prepare_new_file(const std::string& option, const std::string& path, bool force, double bytes) {
    struct stat target {};
    if (::stat(path.c_str(), &target) == 0 && S_ISDIR(target.st_mode)) {
        usage(option + " " + path + ": is a directory, expected the path of an HDF5 file to write");
    }
    if (path_exists(path) && !force) {
        usage(option + " " + path + ": the file exists; hint: --force replaces it, or choose another name");
    }
    const std::string partial = OutputFile::partial_path_for(path);
    if (path_exists(partial)) {
        if (!force) {
            usage(option + " " + path + ": " + partial +
                  " exists, left by an interrupted (or still running) generate; hint: --force removes it");
        }
        if (::unlink(partial.c_str()) != 0) {
            throw Error(exit_io, partial + ": cannot remove the stale partial file: " + std::strerror(errno));
        }
    }
    const std::string directory = detail::directory_of(path);
    struct stat status {};
    if (::stat(directory.c_str(), &status) != 0 || !S_ISDIR(status.st_mode)) {
        throw Error(exit_io, option + " " + path + ": directory " + directory + " does not exist");
    }
    if (bytes > 0x1p62) usage(option + " " + path + ": the requested sizes make a file beyond 2^62 bytes");
    const std::uint64_t free_bytes = free_bytes_at(path);
    if (bytes > static_cast<double>(free_bytes)) {
        std::ostringstream message;
        message << option << " " << path << ": needs about " << static_cast<std::uint64_t>(bytes)
                << " bytes but its file system has " << free_bytes << " free";
        throw Error(exit_io, message.str());
    }
}

StagedFile::~StagedFile() {
    if (!published_) ::unlink(OutputFile::partial_path_for(path_).c_str());
}

File StagedFile::create() const { return File::create(OutputFile::partial_path_for(path_)); }

void StagedFile::publish(bool force) {
    publish_output(path_, force);
    published_ = true;
}

}  // namespace attnbatch::io
