#include "input/mapped_floats.hpp"

#include "input/mapping_faults.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

// Linux 5.14; older kernels refuse it (EINVAL) and the pages fault in as they are read.
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

namespace attnbatch::io::detail {

namespace {
std::uintptr_t page_bytes() noexcept {
    static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    return page;
}
}  // namespace

std::optional<MappedFloats> MappedFloats::of(const std::string& path, const Dataset& dataset) {
    if (!dataset.stored_as_float32le()) return std::nullopt;
    const std::optional<std::uint64_t> offset = dataset.contiguous_offset();
    if (!offset || *offset % kInPlaceBound != 0) return std::nullopt;
    const Dims dims = dataset.dims();
    const std::uint64_t count = element_count(dims);
    if (count == 0) return std::nullopt;
    const std::uint64_t end = *offset + count * sizeof(float);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    struct stat status {};
    void* base = MAP_FAILED;
    std::uint64_t start = 0;
    if (::fstat(fd, &status) == 0 && static_cast<std::uint64_t>(status.st_size) >= end) {
        start = *offset / page_bytes() * page_bytes();
        base = ::mmap(nullptr, static_cast<std::size_t>(end - start), PROT_READ, MAP_SHARED, fd, static_cast<off_t>(start));
    }
    ::close(fd);  // the mapping keeps the file
    if (base == MAP_FAILED) return std::nullopt;
    const auto* data = reinterpret_cast<const float*>(static_cast<const char*>(base) + (*offset - start));
    watch_mapping(base, static_cast<std::size_t>(end - start), path);
    return MappedFloats(base, static_cast<std::size_t>(end - start), data, count, count / dims[0]);
}

MappedFloats::MappedFloats(MappedFloats&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      length_(std::exchange(other.length_, 0)),
      data_(std::exchange(other.data_, nullptr)),
      count_(std::exchange(other.count_, 0)),
      row_elements_(std::exchange(other.row_elements_, 0)) {}

MappedFloats& MappedFloats::operator=(MappedFloats&& other) noexcept {
    if (this != &other) {
        release();
        base_ = std::exchange(other.base_, nullptr);
        length_ = std::exchange(other.length_, 0);
        data_ = std::exchange(other.data_, nullptr);
        count_ = std::exchange(other.count_, 0);
        row_elements_ = std::exchange(other.row_elements_, 0);
    }
    return *this;
}

MappedFloats::~MappedFloats() { release(); }

void MappedFloats::release() noexcept {
    if (!base_) return;
    forget_mapping(base_);
    ::munmap(base_, length_);
}

const float* MappedFloats::elements(std::uint64_t first, std::uint64_t count) const noexcept {
    const float* at = data_ + first;
    populate_mapped_rows(at, static_cast<std::size_t>(count) * sizeof(float));
    return at;
}

void populate_mapped_rows(const void* begin, std::size_t bytes) noexcept {
    if (bytes == 0) return;
    const auto page = page_bytes();
    const auto first = reinterpret_cast<std::uintptr_t>(begin) / page * page;
    const auto stop = reinterpret_cast<std::uintptr_t>(begin) + bytes;
    (void)::madvise(reinterpret_cast<void*>(first), stop - first, MADV_POPULATE_READ);
}

void release_mapped_rows(const void* begin, std::size_t bytes) noexcept {
    const auto page = page_bytes();
    const auto first = (reinterpret_cast<std::uintptr_t>(begin) + page - 1) / page * page;
    const auto last = (reinterpret_cast<std::uintptr_t>(begin) + bytes) / page * page;
    if (last > first) (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace attnbatch::io::detail
