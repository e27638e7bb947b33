// H5Error: a failed HDF5 C call, with the call's numbered name, the file and object it was
// about, and HDF5's own error stack. The stack is copied right after the failure, before any
// other HDF5 call can clear it, and HDF5's automatic printing to stderr is switched off.
// Its message (what a user sees) names the call, the file and the frame that says why, or the
// system error behind it; ATTNBATCH_DEBUG=1 in the environment puts the whole stack in it.
#pragma once

#include <string>
#include <vector>

#include "attnbatch/error.hpp"

namespace attnbatch::io {

// Which file and which object inside it a call concerned; carried by every handle so that
// an error deep in a read still names what the user asked for.
struct Where {
    std::string file;
    std::string object;  // "/" for the file itself
};

// An Error with exit code 4 (a file that cannot be read or written); callers that know better
// (a damaged input is exit 3) catch it and throw their own Error.
class H5Error : public Error {
public:
    H5Error(std::string call, Where where, std::vector<std::string> stack);

    const std::string& call() const noexcept { return call_; }
    const std::string& file() const noexcept { return where_.file; }
    const std::string& object() const noexcept { return where_.object; }
    // One entry per stack frame, outermost (the API call) first: "H5Fopen(): unable to open
    // file (File accessibility: Unable to open file)".
    const std::vector<std::string>& stack() const noexcept { return stack_; }
    std::string stack_text() const;  // the frames, one per line
    // HDF5 could not lock the file: another process writes it, or the file system (some NFS
    // and Lustre mounts) does not support locks.
    bool is_lock_failure() const noexcept;

private:
    std::string call_;
    Where where_;
    std::vector<std::string> stack_;
};

// The hint for lock failures, shared by every message that may need it.
inline constexpr const char* file_locking_hint =
    "hint: another process may have the file open for writing; on NFS or Lustre set "
    "HDF5_USE_FILE_LOCKING=FALSE";

}  // namespace attnbatch::io
