// Files and datasets opened with messages a user can act on.
#include "h5/open_checked.hpp"

#include "attnbatch/io/h5/file_schema.hpp"
#include "attnbatch/io/h5/error.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace attnbatch::io::detail {
namespace {

// "data" for "dir/data.h5": the stem of a path, for the name of a suggested copy.
std::string file_stem(const std::string& path) {
    std::string stem = path;
    for (const char* extension : {".h5", ".hdf5", ".hdf"}) {
        const std::string ext = extension;
        if (stem.size() > ext.size() && stem.compare(stem.size() - ext.size(), ext.size(), ext) == 0) {
            stem.erase(stem.size() - ext.size());
            break;
        }
    }
    return stem;
}

}  // namespace

void check_readable_hdf5(const std::string& path, const std::string& option) {
    // The hints name the option when one named the file.
    const auto hint = [&](const std::string& text) { return option.empty() ? std::string() : "; hint: " + option + text; };
    struct stat status {};
    if (::stat(path.c_str(), &status) != 0) {
        throw Error(exit_io, path + ": cannot open: " + std::strerror(errno) + "; hint: check the path" +
                                 (option.empty() ? "" : " given to " + option));
    }
    if (S_ISDIR(status.st_mode)) {
        throw Error(exit_io, path + ": is a directory, expected an HDF5 file" + hint(" takes a file path"));
    }
    // A FIFO, socket or device would block the open (a FIFO with no writer forever, deaf to
    // SIGTERM) or stream bytes HDF5 cannot seek in.
    if (!S_ISREG(status.st_mode)) {
        const char* kind = S_ISFIFO(status.st_mode) ? "a FIFO" : S_ISSOCK(status.st_mode) ? "a socket"
                           : S_ISCHR(status.st_mode) || S_ISBLK(status.st_mode) ? "a device" : "not a regular file";
        throw Error(exit_io, path + ": is " + std::string(kind) + ", expected a regular HDF5 file" +
                                 hint(" takes a file path (copy streamed data to a file first)"));
    }
    if (::access(path.c_str(), R_OK) != 0) {
        throw Error(exit_io, path + ": cannot read: " + std::strerror(errno) + "; hint: check the permissions");
    }
    bool hdf5 = false;
    try {
        hdf5 = is_hdf5_file(path);
    } catch (const H5Error& error) {
        throw Error(exit_io, path + ": cannot read: " + error.what());
    }
    if (!hdf5) {
        throw Error(exit_invalid_input, path + ": not an HDF5 file (no HDF5 signature found)" +
                                            hint(" expects an HDF5 file, e.g. one written by `attnbatch generate`"));
    }
}

File open_input_file(const std::string& path, const std::string& option, const FileAccess& access) {
    check_readable_hdf5(path, option);
    try {
        return File::open(path, FileMode::read_only, access);
    } catch (const H5Error& error) {
        // The file exists, is readable and has the HDF5 signature: unless another process
        // holds a lock on it, HDF5 refusing it means damaged content (a truncated copy, say).
        if (error.is_lock_failure()) {
            throw Error(exit_io, path + ": cannot open for reading, HDF5 could not lock the file: " +
                                          std::string(error.what()));
        }
        throw Error(exit_invalid_input, path + ": damaged HDF5 file, it cannot be opened (" + std::string(error.what()) +
                                                 "); hint: a truncated or partial copy? regenerate or copy it again");
    }
}

namespace {

// A filter HDF5 lacks would fail the first read of the data, deep in the run and with HDF5's
// whole error stack: refused when the dataset is opened, with the remedies.
void expect_filters_available(const Dataset& dataset) {
    const std::vector<int> missing = dataset.unavailable_filters();
    if (missing.empty()) return;
    const int filter = missing.front();
    const std::string name = filter_name(filter);
    const std::string plain = file_stem(dataset.where().file) + ".plain.h5";
    throw Error(exit_invalid_input,
                dataset.where().file + ": dataset " + dataset.path() + " is compressed with the HDF5 filter " + name +
                    " (id " + std::to_string(filter) + "), which this HDF5 library cannot decode; hint: write an " +
                    "uncompressed copy where the filter is installed (h5repack -f NONE " + dataset.where().file + " " +
                    plain + (filter == 32000 ? ", or h5py, which reads lzf itself" : "") +
                    "), or set HDF5_PLUGIN_PATH to a directory holding the filter's plugin");
}

}  // namespace

Dataset open_input_dataset(const File& file, const std::string& path, const std::string& option,
                           const std::string& role) {
    const ObjectKind kind = object_kind(file, path);
    if (kind == ObjectKind::dataset) {
        Dataset dataset = Dataset::open(file, path);
        expect_filters_available(dataset);
        return dataset;
    }
    throw Error(exit_invalid_input, not_a_dataset(file.path(), path, kind, option, role, root_datasets(file)));
}

std::string not_a_dataset(const std::string& file, const std::string& path, ObjectKind kind, const std::string& option,
                          const std::string& role, const std::vector<std::string>& available) {
    std::string message = file + ": ";
    if (kind == ObjectKind::missing) {
        message += "dataset " + path + " not found";
    } else {
        message += path + " is a " + (kind == ObjectKind::group ? "group" : "named datatype") + ", not a dataset";
    }
    message += "; hint: " + option + " names " + role;
    if (!available.empty()) {
        message += " (datasets in the file:";
        for (std::size_t i = 0; i < available.size() && i < 8; ++i) message += (i ? ", " : " ") + available[i];
        if (available.size() > 8) message += ", ...";
        message += ")";
    }
    return message;
}

void rethrow_read_failure(const std::exception& error) { throw Error(exit_io, error.what()); }

}  // namespace attnbatch::io::detail
