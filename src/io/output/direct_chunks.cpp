#include "output/direct_chunks.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

namespace attnbatch::io {
namespace {

// File offsets, lengths and buffer addresses of O_DIRECT writes are multiples of the device's
// logical block; a page covers every block size in use, and the output's large objects are
// placed on such bounds (File::create's alignment).
constexpr std::uint64_t kDirectAlign = 4096;

bool aligned(std::uint64_t value) { return value % kDirectAlign == 0; }

}  // namespace

DirectChunks::DirectChunks(const std::string& path, const Dataset& dataset)
    : path_(path), dataset_(dataset.id()), element_size_(dataset.type_info().size) {
    const Dims dims = dataset.dims(), chunk = dataset.chunk();
    if (chunk.empty() || !dataset.filters().empty()) return;
    // A chunk is one row-major run when the axes outside its cut axis are 1 and those inside
    // are whole; with the cut axis divided evenly (or the cut on the leading axis), chunk i
    // holds elements [i * S, (i + 1) * S).
    std::size_t cut = 0;
    while (chunk[cut] == 1 && cut + 1 < chunk.size()) ++cut;
    for (std::size_t axis = cut + 1; axis < chunk.size(); ++axis) {
        if (chunk[axis] != dims[axis]) return;
    }
    if (cut > 0 && dims[cut] % chunk[cut] != 0) return;
    chunk_elements_ = element_count(chunk);
    if (!aligned(chunk_elements_ * element_size_)) return;
    dims_.assign(dims.begin(), dims.end());
    fd_ = ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
}

DirectChunks::~DirectChunks() {
    if (fd_ >= 0) ::close(fd_);
    if (cached_fd_ >= 0) ::close(cached_fd_);
}

std::vector<DirectChunks::Run> DirectChunks::plan(std::uint64_t first, std::uint64_t count, const void* data) const {
    std::vector<Run> runs;
    if (fd_ < 0 || count == 0 || first % chunk_elements_ != 0 || count % chunk_elements_ != 0) return runs;
    if (!memory_on_bound(data)) return runs;
    const std::size_t chunk_bytes = chunk_elements_ * element_size_;
    std::vector<hsize_t> origin(dims_.size());
    for (std::uint64_t element = first; element < first + count; element += chunk_elements_) {
        std::uint64_t rest = element;
        for (std::size_t axis = dims_.size(); axis-- > 0;) {
            origin[axis] = rest % dims_[axis];
            rest /= dims_[axis];
        }
        unsigned filters = 0;
        haddr_t address = HADDR_UNDEF;
        hsize_t stored = 0;
        const bool placed = rest == 0 &&  // not past the dataset
                            H5Dget_chunk_info_by_coord(dataset_, origin.data(), &filters, &address, &stored) >= 0 &&
                            address != HADDR_UNDEF && stored == chunk_bytes && aligned(address);
        if (!placed) return {};
        const char* source = static_cast<const char*>(data) + (element - first) * element_size_;
        if (!runs.empty() && runs.back().address + runs.back().bytes == address) {
            runs.back().bytes += chunk_bytes;
        } else {
            runs.push_back(Run{address, source, chunk_bytes});
        }
    }
    return runs;
}

bool DirectChunks::memory_on_bound(const void* data) noexcept { return aligned(reinterpret_cast<std::uintptr_t>(data)); }

std::pair<std::uint64_t, std::uint64_t> DirectChunks::whole_chunks(std::uint64_t first, std::uint64_t count) const {
    if (fd_ < 0 || count == 0) return {first, first};
    const std::uint64_t begin = (first + chunk_elements_ - 1) / chunk_elements_ * chunk_elements_;
    const std::uint64_t end = (first + count) / chunk_elements_ * chunk_elements_;
    if (begin >= end) return {first, first};
    return {begin, end};
}

void DirectChunks::write(const std::vector<Run>& runs, std::size_t begin, std::size_t end, WritePath path) {
    const bool direct = path == WritePath::direct;
    if (!direct && cached_fd_ < 0) {
        cached_fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
        if (cached_fd_ < 0) throw std::system_error(errno, std::generic_category(), "open for writing");
    }
    const int fd = direct ? fd_ : cached_fd_;
    std::size_t run_start = 0;  // of the current run, in the bytes all runs hold
    for (const Run& run : runs) {
        const std::size_t from = std::max(begin, run_start), to = std::min(end, run_start + run.bytes);
        for (std::size_t done = from; done < to;) {
            const std::size_t offset = done - run_start;
            const ssize_t wrote = ::pwrite(fd, run.data + offset, to - done, static_cast<off_t>(run.address + offset));
            if (wrote < 0 && errno == EINTR) continue;
            // A short O_DIRECT write ends off the block bound the next one must start on.
            if (wrote <= 0 || (direct && !aligned(static_cast<std::uint64_t>(wrote)))) {
                throw std::system_error(wrote < 0 ? errno : EIO, std::generic_category(), direct ? "direct write" : "write");
            }
            done += static_cast<std::size_t>(wrote);
        }
        if (direct && to > from) written_ += to - from;
        run_start += run.bytes;
    }
}

bool DirectChunks::write(std::uint64_t first, std::uint64_t count, const void* data, WritePath path) {
    const std::vector<Run> runs = plan(first, count, data);
    if (runs.empty()) return false;
    write(runs, 0, count * element_size_, path);
    return true;
}

}  // namespace attnbatch::io
