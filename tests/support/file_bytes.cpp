#include "support/file_bytes.hpp"

#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <sstream>

namespace attnbatch::testing {

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

void write_text(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
}

bool exists(const std::string& path) {
    struct stat status {};
    return ::lstat(path.c_str(), &status) == 0;
}

std::string digest(const std::string& path) {
    if (!exists(path)) return "";
    // FNV-1a 64 over the bytes: any change to the file changes it in practice.
    std::uint64_t hash = 0xcbf29ce484222325ULL;
    for (const char c : read_text(path)) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 0x100000001b3ULL;
    }
    return std::to_string(hash);
}

std::size_t line_count(const std::string& text) {
    std::size_t lines = 0;
    for (const char c : text) lines += c == '\n';
    return lines;
}

}  // namespace attnbatch::testing
