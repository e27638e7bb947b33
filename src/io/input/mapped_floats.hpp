// An input dataset's float32 elements read where they lie in the page cache.
#pragma once

#include "attnbatch/io/h5/dataset.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace attnbatch::io::detail {

// Data read in place start on this bound (bytes): the step buffers a copy goes to start on a
// cache line, so rows mapped from such a bound sit on the same bounds, and the kernels' loads
// split no more lines than on a copy.
constexpr std::uint64_t kInPlaceBound = 64;

// A dataset of an HDF5 input whose elements lie in the file one after another as
// little-endian float32, from a cache-line bound on: its bytes mapped read-only, so that a
// step computes on its rows where they lie in the page cache instead of on a copy in a buffer
// of its own. The copy wrote every byte of the input once more and the kernel read it back:
// at N=2048 L=256 d=64 on two ranks, 11-14 ms of each rank's 0.10 s of rounds, on the core its
// compute runs on; mapped, 7-9 ms (the page tables and the NaN/inf check).
//
// The size is checked when it is mapped; a file shortened afterwards ends the run with exit 4
// at the first access to the pages it lost (mapping_faults.hpp), as a mapped .npy shard does.
class MappedFloats {
public:
    // None where the elements cannot be read in place (another layout, type, filters, a start
    // off a cache line, a file shorter than the dataset says): the caller copies them instead.
    static std::optional<MappedFloats> of(const std::string& path, const Dataset& dataset);
    MappedFloats(MappedFloats&& other) noexcept;
    MappedFloats& operator=(MappedFloats&& other) noexcept;
    MappedFloats(const MappedFloats&) = delete;
    MappedFloats& operator=(const MappedFloats&) = delete;
    ~MappedFloats();

    // The address of elements [first, first + count), their pages populated (below).
    const float* elements(std::uint64_t first, std::uint64_t count) const noexcept;
    std::uint64_t size() const noexcept { return count_; }
    // Elements per row of the dataset's first dimension (a sequence, or a row of a packed input).
    std::uint64_t row_elements() const noexcept { return row_elements_; }

private:
    MappedFloats(void* base, std::size_t length, const float* data, std::uint64_t count, std::uint64_t row_elements) noexcept
        : base_(base), length_(length), data_(data), count_(count), row_elements_(row_elements) {}
    void release() noexcept;
    void* base_ = nullptr;
    std::size_t length_ = 0;
    const float* data_ = nullptr;
    std::uint64_t count_ = 0;
    std::uint64_t row_elements_ = 0;
};

// Maps the pages of [begin, begin + bytes), a range of a read-only file mapping, now, on the
// calling thread (the reader's) and in one call, rather than faulted in one at a time by the
// compute that reads them. Best effort: without it they fault in as they are read.
void populate_mapped_rows(const void* begin, std::size_t bytes) noexcept;

// Unmaps the whole pages of [begin, begin + bytes), a range of a read-only file mapping (the
// page cache keeps them; a later read maps them again). A step's rows, once computed, so that
// a process's mapped pages stay those of the steps in flight rather than growing to the whole
// input (which RSS-based job accounting would count against the job).
void release_mapped_rows(const void* begin, std::size_t bytes) noexcept;

}  // namespace attnbatch::io::detail
