// Where an output may go (output_paths.hpp): its names, the checks before anything is
// written, and the clean-up of what an interrupted run left.
#include "attnbatch/io/output/output_paths.hpp"

#include "attnbatch/error.hpp"
#include "attnbatch/io/output/output_size.hpp"
#include "attnbatch/io/h5/file_paths.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace attnbatch::io {
namespace {

[[noreturn]] void usage(const std::string& message) { throw Error(exit_usage, message); }

// Whether another process holds the HDF5 lock of `path` (HDF5 takes flock(LOCK_EX) on files
// it opens for writing). Unknowable when the user turned HDF5's locking off: then no.
bool held_by_a_writer(const std::string& path) {
    const char* locking = std::getenv("HDF5_USE_FILE_LOCKING");
    if (locking && std::string(locking) == "FALSE") return false;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    ::close(fd);  // releases our lock, if we got it
    return held;
}

}  // namespace

std::string partial_path_for(const std::string& output_path) { return output_path + ".partial"; }

// OutputFile::create writes the new file under this name and renames it to OUTPUT.partial
// once it is whole: a run killed while creating it (a second stop signal, SIGKILL) leaves
// this, never a .partial that --resume cannot read.
std::string staging_path_for(const std::string& output_path) { return partial_path_for(output_path) + ".new"; }

void check_output_target(const std::string& output_path, bool force, bool continuing) {
    const std::string partial = partial_path_for(output_path);
    const std::string staging = staging_path_for(output_path);
    // A staging file is never resumable, so it is removed without --force (prepare_output_path);
    // unless a run is creating it right now.
    if (path_exists(staging) && held_by_a_writer(staging)) {
        usage(staging + " is being created by another process (it holds the file's lock); hint: wait for that "
                        "run or stop it first");
    }
    if (!force && path_exists(output_path)) {
        usage(output_path + ": the output file exists; hint: --force replaces it once the new run is complete, or "
                            "choose another --output");
    }
    if (!continuing && path_exists(partial)) {
        if (!force) {
            usage(partial + " exists, left by an interrupted run; hint: --resume continues it, --force starts afresh");
        }
        if (held_by_a_writer(partial)) {
            usage(partial + " is being written by another process (it holds the file's lock), so --force does not "
                            "remove it; hint: wait for that run or stop it first");
        }
    }
    const std::string directory = directory_of(output_path);
    struct stat status {};
    if (::stat(directory.c_str(), &status) != 0 || !S_ISDIR(status.st_mode)) {
        throw Error(exit_io, output_path + ": cannot create the output: directory " + directory +
                                       " does not exist; hint: create it or fix --output");
    }
    // Root passes this test wherever root may write, as it does the creation itself; a
    // read-only mount stops both.
    if (!continuing && ::access(directory.c_str(), W_OK | X_OK) != 0) {
        const int cause = errno;
        throw Error(exit_io, partial + ": cannot create the output: directory " + directory + " is not writable: " +
                                 std::strerror(cause) + "; hint: " +
                                 (cause == EROFS ? "the file system is mounted read-only; write to another directory"
                                                 : "check the permissions of the directory, or choose another --output"));
    }
}

void prepare_output_path(const std::string& output_path, bool force) {
    check_output_target(output_path, force);
    const std::string staging = staging_path_for(output_path);
    if (::unlink(staging.c_str()) != 0 && errno != ENOENT) {
        throw Error(exit_io, staging + ": cannot remove the output a killed run left half created: " + std::strerror(errno));
    }
    const std::string partial = partial_path_for(output_path);
    if (path_exists(partial) && ::unlink(partial.c_str()) != 0) {
        throw Error(exit_io, partial + ": cannot remove the stale partial output: " + std::strerror(errno));
    }
}

void check_output_is_not_an_input(const std::string& output_path,
                                  const std::vector<std::pair<std::string, std::string>>& inputs, const std::string& option) {
    struct stat out {};
    if (::stat(output_path.c_str(), &out) != 0) return;
    if (S_ISDIR(out.st_mode)) {
        usage(option + " " + output_path + " is a directory, expected a file path; hint: e.g. " + output_path + "/out.h5");
    }
    for (const auto& [what, input] : inputs) {
        if (!input.empty() && same_file(output_path, input)) {
            usage(option + " " + output_path + " is the same file as " + what + " " + input +
                  ", expected a different path (the files read are never overwritten, even with --force)");
        }
    }
}

void discard_partial_output(const std::string& output_path) {
    const std::string partial = partial_path_for(output_path);
    if (::unlink(partial.c_str()) != 0 && errno != ENOENT) {
        throw Error(exit_io, partial + ": cannot remove the partial output: " + std::strerror(errno));
    }
}

void prepare_new_file(const std::string& option, const std::string& path, bool force, double bytes) {
    struct stat target {};
    if (::stat(path.c_str(), &target) == 0 && S_ISDIR(target.st_mode)) {
        usage(option + " " + path + ": is a directory, expected the path of an HDF5 file to write");
    }
    if (path_exists(path) && !force) {
        usage(option + " " + path + ": the file exists; hint: --force replaces it, or choose another name");
    }
    const std::string partial = partial_path_for(path);
    if (path_exists(partial)) {
        if (!force) {
            usage(option + " " + path + ": " + partial +
                  " exists, left by an interrupted (or still running) generate; hint: --force removes it");
        }
        if (::unlink(partial.c_str()) != 0) {
            throw Error(exit_io, partial + ": cannot remove the stale partial file: " + std::strerror(errno));
        }
    }
    const std::string directory = directory_of(path);
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

}  // namespace attnbatch::io
