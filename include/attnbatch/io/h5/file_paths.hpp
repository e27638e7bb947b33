// File-system paths as io names them: the real path a run records of its files, and the
// directory a new file goes to.
#pragma once

#include <string>

namespace attnbatch::io {

// `path` from the root with every symbolic link resolved, so that two names of one file (two
// links, two working directories) are recorded alike (the journal's identity, the outputs'
// input_file_absolute, the maps' source_absolute, an imported model's source); a path that does
// not exist is made absolute and lexically normal; "" stays "".
std::string real_path(const std::string& path);

// The directory holding `path` ("." for a bare file name).
std::string directory_of(const std::string& path);

// Whether anything (a file, a directory, a dangling link) has the name `path`.
bool path_exists(const std::string& path);

// Whether `a` and `b` name one file: the same inode when both exist (links, "./a" and "a"),
// else, for files yet to be written, the same name in the same directory (by inode) once
// symbolic links are followed, a dangling one to where it points.
bool same_file(const std::string& a, const std::string& b);

}  // namespace attnbatch::io
