// The errors the io layer reports to users: one line each, with the exit code of SPEC.md.
// The CLI defines its own enum; these values are the same by contract, not by include, so
// that io stays below cli in the layering.
#pragma once

#include <stdexcept>
#include <string>

namespace attnbatch::io {

enum ExitStatus : int {
    exit_usage = 2,          // an option, or a combination of options, that cannot work
    exit_invalid_input = 3,  // the input file's content breaks the contract
    exit_io = 4,             // a file that cannot be opened, read, written or renamed
};

// A failure the user can fix. `what()` is one line naming file, dataset or option, expected
// versus found, and a hint where one helps.
class Error : public std::runtime_error {
public:
    Error(int exit_code, const std::string& message) : std::runtime_error(message), exit_code_(exit_code) {}
    int exit_code() const noexcept { return exit_code_; }

private:
    int exit_code_;
};

// Raised while describing, validating or reading the input and weights files.
class InputError : public Error {
public:
    using Error::Error;
};

// Raised while creating, writing or publishing the output file.
class OutputError : public Error {
public:
    using Error::Error;
};

}  // namespace attnbatch::io
