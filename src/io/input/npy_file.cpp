// The .npy header parser and the read-only mapping (npy_file.hpp says why by hand).
#include "attnbatch/io/input/npy_file.hpp"

#include "attnbatch/kernels/half.hpp"
#include "input/mapping_faults.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <limits>
#include <utility>

namespace attnbatch::io {
namespace {

[[noreturn]] void invalid(const std::string& message) { throw Error(exit_invalid_input, message); }

// A file descriptor closed on every path.
class Descriptor {
public:
    Descriptor(const std::string& path, const std::string& role) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
        if (fd_ < 0) throw Error(exit_io, role + " " + path + ": cannot open: " + std::strerror(errno));
    }
    ~Descriptor() { ::close(fd_); }
    Descriptor(const Descriptor&) = delete;
    Descriptor& operator=(const Descriptor&) = delete;
    int get() const { return fd_; }

private:
    int fd_;
};

// Reads exactly `count` bytes at `offset`; false at the end of the file.
bool read_at(int fd, void* out, std::size_t count, off_t offset, const std::string& what) {
    auto* bytes = static_cast<char*>(out);
    while (count > 0) {
        const ssize_t got = ::pread(fd, bytes, count, offset);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) throw Error(exit_io, what + ": cannot read: " + std::strerror(errno));
        if (got == 0) return false;
        bytes += got;
        count -= static_cast<std::size_t>(got);
        offset += got;
    }
    return true;
}

// The header dict, a Python literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
public:
    HeaderParser(const std::string& text, const std::string& where) : text_(text), where_(where) {}

    void parse(NpyHeader& header, bool& fortran_order) {
        bool have_descr = false, have_order = false, have_shape = false;
        expect('{');
        while (true) {
            skip_space();
            if (peek() == '}') break;
            const std::string key = string_literal();
            expect(':');
            skip_space();
            if (key == "descr") {
                once(have_descr, key);
                if (peek() == '[') {
                    fail("has a structured dtype (descr is a list of fields), expected one numeric dtype such as '<f4'");
                }
                header.descr = string_literal();
            } else if (key == "fortran_order") {
                once(have_order, key);
                fortran_order = boolean();
            } else if (key == "shape") {
                once(have_shape, key);
                header.shape = tuple();
            } else {
                fail("has the header key '" + key + "', expected only 'descr', 'fortran_order' and 'shape'");
            }
            skip_space();
            if (peek() == ',') {
                ++at_;
                continue;
            }
            skip_space();
            if (peek() != '}') fail("has a malformed header dict near offset " + std::to_string(at_) + ", expected ',' or '}'");
        }
        ++at_;
        while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\r' || text_[at_] == '\t')) ++at_;
        if (at_ != text_.size()) fail("has bytes after the header dict, expected only spaces and a newline");
        if (!have_descr || !have_order || !have_shape) {
            fail(std::string("has a header without '") + (!have_descr ? "descr" : !have_order ? "fortran_order" : "shape") +
                 "', expected 'descr', 'fortran_order' and 'shape'");
        }
    }

private:
    [[noreturn]] void fail(const std::string& what) const { invalid(where_ + " " + what + " (not a .npy array numpy.save writes)"); }

    char peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }
    void skip_space() {
        while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n')) ++at_;
    }
    void expect(char c) {
        skip_space();
        if (peek() != c) fail(std::string("has a malformed header dict near offset ") + std::to_string(at_) + ", expected '" + c + "'");
        ++at_;
    }
    void once(bool& seen, const std::string& key) {
        if (seen) fail("has the header key '" + key + "' twice");
        seen = true;
    }
    std::string string_literal() {
        skip_space();
        const char quote = peek();
        if (quote != '\'' && quote != '"') fail("has a malformed header dict near offset " + std::to_string(at_) + ", expected a quoted string");
        const std::size_t end = text_.find(quote, at_ + 1);
        if (end == std::string::npos) fail("has an unterminated string in its header");
        std::string value = text_.substr(at_ + 1, end - at_ - 1);
        if (value.find('\\') != std::string::npos) fail("has an escaped string in its header, expected plain names");
        at_ = end + 1;
        return value;
    }
    bool boolean() {
        if (text_.compare(at_, 4, "True") == 0) {
            at_ += 4;
            return true;
        }
        if (text_.compare(at_, 5, "False") == 0) {
            at_ += 5;
            return false;
        }
        fail("has 'fortran_order' that is neither True nor False");
    }
    std::vector<std::int64_t> tuple() {
        if (peek() != '(') fail("has a 'shape' that is not a tuple of integers");
        ++at_;
        std::vector<std::int64_t> shape;
        while (true) {
            skip_space();
            if (peek() == ')') break;
            if (peek() < '0' || peek() > '9') fail("has a 'shape' that is not a tuple of non-negative integers");
            std::int64_t value = 0;
            while (peek() >= '0' && peek() <= '9') {
                const int digit = peek() - '0';
                if (value > (std::numeric_limits<std::int64_t>::max() - digit) / 10) fail("has an extent beyond int64 in its 'shape'");
                value = value * 10 + digit;
                ++at_;
            }
            if (peek() == 'L') ++at_;  // Python 2's long literal, still written by old numpy
            shape.push_back(value);
            skip_space();
            if (peek() == ',') {
                ++at_;
                continue;
            }
            skip_space();
            if (peek() != ')') fail("has a malformed 'shape' tuple");
        }
        ++at_;
        return shape;
    }

    const std::string& text_;
    const std::string& where_;
    std::size_t at_ = 0;
};

void classify(NpyHeader& header, const std::string& where) {
    const std::string& descr = header.descr;
    if (descr == "|O" || descr == "O" || descr == "<O" || descr == ">O") {
        invalid(where + " holds Python objects (dtype object, stored as a pickle), expected float32, float64 or float16; "
                        "hint: numpy.save(path, numpy.asarray(a, dtype=numpy.float32))");
    }
    if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '>' && descr[0] != '|' && descr[0] != '=')) {
        invalid(where + " has dtype '" + descr + "', expected a numeric dtype such as '<f4'");
    }
    const char kind = descr[1];
    std::size_t bytes = 0;
    for (std::size_t i = 2; i < descr.size(); ++i) {
        if (descr[i] < '0' || descr[i] > '9' || bytes > 64) invalid(where + " has dtype '" + descr + "', expected a numeric dtype such as '<f4'");
        bytes = bytes * 10 + static_cast<std::size_t>(descr[i] - '0');
    }
    const bool floating = kind == 'f' && (bytes == 2 || bytes == 4 || bytes == 8);
    const bool integer = (kind == 'i' || kind == 'u') && (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8);
    if (!floating && !integer) {
        invalid(where + " has dtype '" + descr + "', expected float32, float64 or float16 data (integer sidecars)");
    }
    header.kind = floating ? NpyKind::floating : kind == 'i' ? NpyKind::signed_integer : NpyKind::unsigned_integer;
    header.item_bytes = bytes;
    header.big_endian = descr[0] == '>' && bytes > 1;
}

template <class T>
T load(const unsigned char* p, bool swap) {
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, p, sizeof(T));
    if (swap) {
        for (std::size_t i = 0; i < sizeof(T) / 2; ++i) std::swap(bytes[i], bytes[sizeof(T) - 1 - i]);
    }
    T value;
    std::memcpy(&value, bytes, sizeof(T));
    return value;
}

}  // namespace

std::int64_t NpyHeader::elements() const {
    std::int64_t count = 1;
    for (const std::int64_t extent : shape) count *= extent;
    return count;
}

std::string NpyHeader::shape_text() const {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + "]";
}

std::string NpyHeader::dtype_name() const {
    const std::string bits = std::to_string(item_bytes * 8);
    switch (kind) {
        case NpyKind::floating: return "float" + bits;
        case NpyKind::signed_integer: return "int" + bits;
        case NpyKind::unsigned_integer: return "uint" + bits;
    }
    return descr;
}

NpyHeader read_npy_header(const std::string& path, const std::string& role) {
    const std::string where = role + " " + path;
    Descriptor fd(path, role);
    struct stat status {};
    if (::fstat(fd.get(), &status) != 0) throw Error(exit_io, where + ": cannot stat: " + std::strerror(errno));
    if (!S_ISREG(status.st_mode)) throw Error(exit_io, where + ": not a regular file");
    NpyHeader header;
    header.path = path;
    header.file_bytes = static_cast<std::int64_t>(status.st_size);

    unsigned char start[12] = {};
    const bool whole = read_at(fd.get(), start, sizeof start, 0, where);
    if (start[0] == 0x80 && start[1] >= 2 && start[1] <= 5) {
        invalid(where + " is a Python pickle, not a .npy array; hint: numpy.save(path, array) writes one");
    }
    if (std::memcmp(start, "PK\x03\x04", 4) == 0) {
        invalid(where + " is a zip archive (an .npz?), not a .npy array; hint: save each array with numpy.save, or "
                        "convert it with scripts/convert_to_input.py");
    }
    if (!whole || std::memcmp(start, "\x93NUMPY", 6) != 0) {
        invalid(where + " is not a .npy file (no \\x93NUMPY magic), expected an array written by numpy.save");
    }
    const int major = start[6], minor = start[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0) {
        invalid(where + " has .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                ", expected 1.0, 2.0 or 3.0");
    }
    std::size_t header_bytes = 0;
    std::size_t prefix = 0;
    if (major == 1) {
        header_bytes = static_cast<std::size_t>(start[8]) | static_cast<std::size_t>(start[9]) << 8;
        prefix = 10;
    } else {
        header_bytes = static_cast<std::size_t>(start[8]) | static_cast<std::size_t>(start[9]) << 8 |
                       static_cast<std::size_t>(start[10]) << 16 | static_cast<std::size_t>(start[11]) << 24;
        prefix = 12;
    }
    if (header_bytes > (1u << 20) || static_cast<std::int64_t>(prefix + header_bytes) > header.file_bytes) {
        invalid(where + " has a header of " + std::to_string(header_bytes) + " bytes in a file of " +
                std::to_string(header.file_bytes) + " bytes (truncated or not a .npy file)");
    }
    std::string text(header_bytes, '\0');
    read_at(fd.get(), text.data(), header_bytes, static_cast<off_t>(prefix), where);
    bool fortran_order = false;
    HeaderParser(text, where).parse(header, fortran_order);
    classify(header, where);
    if (fortran_order) {
        invalid(where + " is stored in Fortran order (fortran_order: True), expected C order; hint: "
                        "numpy.save(path, numpy.ascontiguousarray(a))");
    }
    header.data_offset = static_cast<std::int64_t>(prefix + header_bytes);
    // The product of the extents, checked against overflow before it is trusted.
    std::int64_t elements = 1;
    bool overflow = false;
    for (const std::int64_t extent : header.shape) {
        if (extent != 0 && elements > std::numeric_limits<std::int64_t>::max() / extent) overflow = true;
        elements = overflow ? elements : elements * extent;
    }
    const std::int64_t item = static_cast<std::int64_t>(header.item_bytes);
    const std::int64_t data_bytes = header.file_bytes - header.data_offset;
    if (overflow || elements > std::numeric_limits<std::int64_t>::max() / item || elements * item != data_bytes) {
        invalid(where + " has " + std::to_string(data_bytes) + " bytes of data, but its header says " + header.dtype_name() +
                " " + header.shape_text() + " = " + (overflow ? std::string("more than 2^63") : std::to_string(elements * item)) +
                " bytes; expected equal (a truncated or appended file)");
    }
    return header;
}

MappedNpy::MappedNpy(const NpyHeader& header) : header_(header) {
    Descriptor fd(header.path, "--input");
    // Checked here; a file shortened later faults on access through the mapping, which ends
    // the run with one line (mapping_faults.hpp).
    struct stat status {};
    if (::fstat(fd.get(), &status) != 0 || status.st_size != header.file_bytes) {
        throw Error(exit_io, header.path + ": the .npy file changed since it was checked (" + std::to_string(status.st_size) +
                                 " bytes, expected " + std::to_string(header.file_bytes) + "); hint: run again");
    }
    length_ = static_cast<std::size_t>(header.file_bytes);
    void* base = ::mmap(nullptr, length_, PROT_READ, MAP_SHARED, fd.get(), 0);
    if (base == MAP_FAILED) throw Error(exit_io, header.path + ": cannot map the .npy file: " + std::strerror(errno));
    base_ = base;
    data_ = static_cast<const unsigned char*>(base) + header.data_offset;
    detail::watch_mapping(base_, length_, header.path);
}

MappedNpy::MappedNpy(MappedNpy&& other) noexcept
    : header_(std::move(other.header_)),
      base_(std::exchange(other.base_, nullptr)),
      length_(std::exchange(other.length_, 0)),
      data_(std::exchange(other.data_, nullptr)) {}

MappedNpy& MappedNpy::operator=(MappedNpy&& other) noexcept {
    if (this != &other) {
        release();
        header_ = std::move(other.header_);
        base_ = std::exchange(other.base_, nullptr);
        length_ = std::exchange(other.length_, 0);
        data_ = std::exchange(other.data_, nullptr);
    }
    return *this;
}

MappedNpy::~MappedNpy() { release(); }

void MappedNpy::release() noexcept {
    if (!base_) return;
    detail::forget_mapping(base_);
    ::munmap(base_, length_);
}

std::int64_t npy_integer_at(const NpyHeader& header, const unsigned char* data, std::int64_t i) {
    const unsigned char* p = data + static_cast<std::size_t>(i) * header.item_bytes;
    const bool swap = header.big_endian;
    const bool is_signed = header.kind == NpyKind::signed_integer;
    switch (header.item_bytes) {
        case 1: return is_signed ? load<std::int8_t>(p, false) : load<std::uint8_t>(p, false);
        case 2: return is_signed ? load<std::int16_t>(p, swap) : load<std::uint16_t>(p, swap);
        case 4: return is_signed ? load<std::int32_t>(p, swap) : static_cast<std::int64_t>(load<std::uint32_t>(p, swap));
        default: {
            if (is_signed) return load<std::int64_t>(p, swap);
            const std::uint64_t value = load<std::uint64_t>(p, swap);
            return value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                       ? std::numeric_limits<std::int64_t>::max()
                       : static_cast<std::int64_t>(value);
        }
    }
}

void npy_floats_to_f32(const NpyHeader& header, const unsigned char* data, std::size_t count, float* out) {
    const bool swap = header.big_endian;
    if (header.item_bytes == 4 && !swap) {
        std::memcpy(out, data, count * sizeof(float));
    } else if (header.item_bytes == 4) {
        for (std::size_t i = 0; i < count; ++i) out[i] = load<float>(data + 4 * i, true);
    } else if (header.item_bytes == 8) {
        for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<float>(load<double>(data + 8 * i, swap));
    } else {
        for (std::size_t i = 0; i < count; ++i) out[i] = kernels::half_to_float(load<std::uint16_t>(data + 2 * i, swap));
    }
}

double npy_float_at(const NpyHeader& header, const unsigned char* data, std::int64_t i) {
    const unsigned char* p = data + static_cast<std::size_t>(i) * header.item_bytes;
    if (header.item_bytes == 8) return load<double>(p, header.big_endian);
    if (header.item_bytes == 4) return load<float>(p, header.big_endian);
    return kernels::half_to_float(load<std::uint16_t>(p, header.big_endian));
}

std::vector<std::int64_t> read_npy_integers(const NpyHeader& header) {
    std::vector<std::int64_t> values(static_cast<std::size_t>(header.elements()));
    if (values.empty()) return values;
    const MappedNpy mapped(header);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = npy_integer_at(header, mapped.data(), static_cast<std::int64_t>(i));
    return values;
}

}  // namespace attnbatch::io
