// The superblock's end-of-file address, decoded from the file's bytes (the HDF5 file format
// specification, "Superblock").
#include "attnbatch/io/h5/superblock.hpp"

#include "attnbatch/error.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace attnbatch::io {
namespace {

constexpr std::array<unsigned char, 8> kSignature = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
// The largest superblock of a known version: version 1 with 8-byte offsets is 24 + 4 + 4*8
// bytes before its root group's symbol table entry, which is not needed here.
constexpr std::size_t kLongestPrefix = 64;

class ReadOnlyFile {
public:
    explicit ReadOnlyFile(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
        if (fd_ < 0) fail("cannot open it");
    }
    ~ReadOnlyFile() { ::close(fd_); }
    ReadOnlyFile(const ReadOnlyFile&) = delete;
    ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

    std::uint64_t size() const {
        struct stat status {};
        if (::fstat(fd_, &status) != 0) fail("cannot stat it");
        return static_cast<std::uint64_t>(status.st_size);
    }

    // Up to `count` bytes at `offset`; fewer at the end of the file.
    std::size_t read(std::uint64_t offset, unsigned char* to, std::size_t count) const {
        std::size_t got = 0;
        while (got < count) {
            const ssize_t n = ::pread(fd_, to + got, count - got, static_cast<off_t>(offset + got));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) fail("cannot read its superblock");
            if (n == 0) break;
            got += static_cast<std::size_t>(n);
        }
        return got;
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw Error(exit_io, path_ + ": " + what + " (" + std::strerror(errno) + ")");
    }

    std::string path_;
    int fd_;
};

std::uint64_t little_endian(const unsigned char* bytes, std::size_t width) {
    std::uint64_t value = 0;
    for (std::size_t i = width; i-- > 0;) value = value << 8 | bytes[i];
    return value;
}

// Where the end-of-file address lies in a superblock of `version`, from its signature, and
// where the size of offsets is; nullopt for a version this reader does not know.
struct Fields {
    std::size_t offset_size_at;
    std::size_t base_address_at;  // base address, then two more addresses, then end of file
};

std::optional<Fields> fields_of(unsigned version) {
    switch (version) {
        case 0: return Fields{13, 24};
        case 1: return Fields{13, 28};  // adds the indexed storage K and two reserved bytes
        case 2:
        case 3: return Fields{9, 12};
        default: return std::nullopt;
    }
}

std::optional<std::uint64_t> end_in_superblock(const unsigned char* block, std::size_t length) {
    const std::optional<Fields> fields = fields_of(block[8]);
    if (!fields) return std::nullopt;
    const std::size_t width = block[fields->offset_size_at];
    if (width != 2 && width != 4 && width != 8) return std::nullopt;
    // Versions 0 and 1: base, free-space info, end of file; 2 and 3: base, superblock
    // extension, end of file.
    const std::size_t end_at = fields->base_address_at + 2 * width;
    if (end_at + width > length) return std::nullopt;
    return little_endian(block + end_at, width);
}

}  // namespace

std::optional<std::uint64_t> recorded_end_of_file(const std::string& path) {
    const ReadOnlyFile file(path);
    const std::uint64_t size = file.size();
    std::array<unsigned char, kLongestPrefix> block{};
    // HDF5 looks at 0, then at every power of two from 512 (a user block's possible sizes).
    for (std::uint64_t at = 0; at < size; at = at == 0 ? 512 : 2 * at) {
        const std::size_t length = file.read(at, block.data(), block.size());
        if (length < kSignature.size() + 1 || std::memcmp(block.data(), kSignature.data(), kSignature.size()) != 0) continue;
        return end_in_superblock(block.data(), length);
    }
    return std::nullopt;
}

}  // namespace attnbatch::io
