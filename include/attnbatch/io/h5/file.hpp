// Files and groups: create (never overwriting), open, flush and a checked close; whether a
// path is an HDF5 file; what kind of object a path inside a file names.
//
// Files keep HDF5's default file format (no H5Pset_libver_bounds to "latest"): a file that
// was flushed before a crash then reopens without `h5clear -s`, which resuming relies on.
#pragma once

#include "attnbatch/io/h5/error.hpp"
#include "attnbatch/io/h5/file_access.hpp"
#include "attnbatch/io/h5/handle.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace attnbatch::io {

// How HDF5 places and caches the data of a file this process writes, beside how the file is
// reached (FileAccess).
struct FileTuning {
    // > 0: every object of at least that many bytes starts on a multiple of it
    // (H5Pset_alignment), so that whole chunks can be written to the disk directly.
    std::uint64_t alignment = 0;
    // false: no cache of raw chunks (H5Pset_cache), as under MPI-IO: a write is in the file when
    // H5Dwrite returns, and HDF5 reads what was written to the file around it.
    bool chunk_cache = true;
    // false (at creation): file space that a rewrite frees is never handed out again
    // (H5F_FSPACE_STRATEGY_NONE: every allocation at the end of the file). A compressed chunk
    // rewritten moves, and its old bytes stay where the last flushed chunk index points until
    // the next flush: a process killed before that flush leaves a file whose old chunks are
    // still whole, instead of overwritten by chunks placed in their space since.
    bool reuse_freed_space = true;
};

class File {
public:
    File() noexcept = default;  // closed; a moved-from File is too
    // Fails (H5Error from H5Fcreate) when `path` exists: H5F_ACC_EXCL.
    static File create(const std::string& path, const FileAccess& access = {}, const FileTuning& tuning = {});
    static File open(const std::string& path, FileMode mode, const FileAccess& access = {}, const FileTuning& tuning = {});

    hid_t id() const noexcept { return handle_.id(); }
    bool is_open() const noexcept { return handle_.valid(); }
    const std::string& path() const noexcept { return where_.file; }
    const Where& where() const noexcept { return where_; }

    void flush();  // H5Fflush, global scope: everything written so far survives a crash
    // Opened through MPI-IO (FileAccess from mpi_io_access), where flush() also syncs the
    // file to its device (MPI_File_sync) on every rank.
    bool uses_mpi_io() const;
    // Checked H5Fclose. Every dataset and attribute of the file must be closed first, else
    // HDF5 would silently keep the file open; that is a std::logic_error.
    void close();

private:
    File(hid_t id, std::string path) : handle_(id), where_{std::move(path), "/"} {}
    FileHandle handle_;
    Where where_;
};

class Group {
public:
    // Intermediate groups are created as needed.
    static Group create(const File& file, const std::string& path);
    static Group open(const File& file, const std::string& path);

    hid_t id() const noexcept { return handle_.id(); }
    const Where& where() const noexcept { return where_; }

private:
    Group(hid_t id, Where where) : handle_(id), where_(std::move(where)) {}
    GroupHandle handle_;
    Where where_;
};

// True for an HDF5 file, false for a readable file that is not one; H5Error when the path
// cannot be read at all.
bool is_hdf5_file(const std::string& path);

enum class ObjectKind { missing, group, dataset, named_datatype, other };

// What `path` (absolute, "/a/b") names in `file`; missing when any component is absent.
ObjectKind object_kind(const File& file, const std::string& path);

// Paths of the datasets directly under the root group, for "did you mean" hints.
std::vector<std::string> root_datasets(const File& file);

}  // namespace attnbatch::io
