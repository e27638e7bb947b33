// The one error type of attnbatch and the one table of exit codes (docs/formats.md "Exit
// codes"), shared by every layer above the kernels: io, distributed and cli throw Error with
// the code the user will see, and the message is built once, where the failure is understood.
// The kernels stay below this header on purpose: they report broken preconditions with
// std::invalid_argument, which is a bug of their caller, not something a user can fix.
#pragma once

#include <stdexcept>
#include <string>

namespace attnbatch {

enum ExitCode : int {
    exit_ok = 0,
    exit_internal = 1,       // a bug: anything that is not one of the codes below
    exit_usage = 2,          // an option, a combination of options or a resource limit that cannot work
    exit_invalid_input = 3,  // an input file's content breaks the contract
    exit_io = 4,             // a file that cannot be opened, read, written or renamed
    exit_interrupted = 5,    // stopped by a signal after a clean checkpoint (resumable)
};

// Running out of memory is a configuration error: the job asked for more than the machine
// has (a --max-memory above what is free, or a problem whose single sequence is too big).
// Decided here once for every path that meets std::bad_alloc.
inline constexpr ExitCode exit_out_of_memory = exit_usage;
inline constexpr const char* out_of_memory_message =
    "out of memory; hint: lower --max-memory, or the problem size (--save-weights, --weights-seqs)";

// A failure the user can fix. `what()` is one line naming the option, file, dataset or
// value, what was expected and what was found, and a hint where one helps.
class Error : public std::runtime_error {
public:
    Error(int exit_code, const std::string& message) : std::runtime_error(message), exit_code_(exit_code) {}
    int exit_code() const noexcept { return exit_code_; }

private:
    int exit_code_;
};

}  // namespace attnbatch
