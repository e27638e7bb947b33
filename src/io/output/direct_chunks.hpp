// Writing whole chunks of the output's large datasets around HDF5, at the addresses HDF5 placed
// them: straight to the disk (O_DIRECT) in the durable mode, where the bytes must reach the disk
// before publication anyway and then skip the page cache, its copy on the compute cores, its
// lock and its writeback; in the scratch mode whichever way has cost less (write_path_choice.hpp).
#pragma once

#include "attnbatch/io/h5/dataset.hpp"
#include "output/write_path_choice.hpp"

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attnbatch::io {

// Whole chunks of one dataset, written with pwrite on a descriptor of the file opened with
// O_DIRECT, or on one without it. Only for datasets without filters whose chunks are placed at
// creation (their addresses never change) and whose every chunk is a contiguous run of the
// dataset in row-major order (chunk_shape() makes no other kind). HDF5 caches no raw data under MPI-IO, so bytes
// written here and bytes HDF5 writes elsewhere in the file do not overwrite each other. The
// caller's memory holds the elements as the file stores them (float32 as float, float16 as
// its bits): they are copied, not converted.
class DirectChunks {
public:
    // Unusable (write() always declines) when the dataset does not qualify or the file system
    // refuses O_DIRECT (tmpfs before Linux 6.6, some network file systems). `dataset` stays open
    // while this is used.
    DirectChunks(const std::string& path, const Dataset& dataset);
    ~DirectChunks();
    DirectChunks(const DirectChunks&) = delete;
    DirectChunks& operator=(const DirectChunks&) = delete;

    bool usable() const noexcept { return fd_ >= 0; }

    // The file's runs holding the dataset's elements [first, first + count) (row-major
    // numbering) from `data`: whole chunks placed on aligned file offsets, from aligned memory.
    // Empty when they do not qualify: the caller then writes them through HDF5.
    struct Run {
        std::uint64_t address;
        const char* data;
        std::size_t bytes;
    };
    std::vector<Run> plan(std::uint64_t first, std::uint64_t count, const void* data) const;
    // Whether whole chunks can go to the disk straight from memory at `data` (plan()'s rule
    // for memory); elsewhere a caller copies them to a buffer on such a bound first.
    static bool memory_on_bound(const void* data) noexcept;
    // The whole chunks among elements [first, first + count): [begin, end) on chunk bounds, or
    // begin == end when none is whole (or the dataset does not qualify). A block's bounds need
    // not fall on chunk bounds: the parts of a chunk at either end are the caller's to write.
    std::pair<std::uint64_t, std::uint64_t> whole_chunks(std::uint64_t first, std::uint64_t count) const;
    // Bytes [begin, end) of what `runs` hold, past the page cache or through it; the bounds fall
    // on chunk bounds. Throws std::system_error when the file system fails the write.
    void write(const std::vector<Run>& runs, std::size_t begin, std::size_t end, WritePath path);
    // plan(), then all of it written `path`'s way; false (nothing written) when it is empty.
    bool write(std::uint64_t first, std::uint64_t count, const void* data, WritePath path = WritePath::direct);
    std::size_t chunk_bytes() const noexcept { return chunk_elements_ * element_size_; }
    std::size_t element_size() const noexcept { return element_size_; }
    std::uint64_t written() const noexcept { return written_; }  // bytes, past the page cache

private:
    int fd_ = -1;  // O_DIRECT
    int cached_fd_ = -1;  // opened at the first write through the page cache
    std::string path_;
    hid_t dataset_ = H5I_INVALID_HID;
    std::vector<hsize_t> dims_;
    std::uint64_t chunk_elements_ = 0;
    std::size_t element_size_ = 0;
    std::uint64_t written_ = 0;
};

}  // namespace attnbatch::io
