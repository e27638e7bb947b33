// Files as bytes: reading, writing, and telling whether a run changed one.
#pragma once

#include <cstddef>
#include <string>

namespace attnbatch::testing {

std::string read_text(const std::string& path);  // "" when unreadable
void write_text(const std::string& path, const std::string& text);
bool exists(const std::string& path);  // without following a final symlink
std::string digest(const std::string& path);  // of the file's bytes; "" when it does not exist
std::size_t line_count(const std::string& text);

}  // namespace attnbatch::testing
