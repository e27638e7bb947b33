// Capturing HDF5's error stack as text, and the H5Error message built from it.
#include "attnbatch/io/h5/error.hpp"

#include "h5/check.hpp"

#include <sys/resource.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>

namespace attnbatch::io {
namespace {

std::string message_text(hid_t message_id) {
    char buffer[256] = {};
    H5E_type_t type;
    if (H5Eget_msg(message_id, &type, buffer, sizeof buffer) < 0) return "?";
    return buffer;
}

herr_t collect_frame(unsigned /*index*/, const H5E_error2_t* frame, void* data) {
    auto& frames = *static_cast<std::vector<std::string>*>(data);
    std::string text = frame->func_name ? frame->func_name : "?";
    text += "(): ";
    text += frame->desc ? frame->desc : "";
    text += " (" + message_text(frame->maj_num) + ": " + message_text(frame->min_num) + ")";
    // Some descriptions embed ctime() output with its newline; messages stay on one line.
    for (char& c : text) {
        if (c == '\n' || c == '\r') c = ' ';
    }
    frames.push_back(std::move(text));
    return 0;
}

// The system error behind a failure, when a frame carries one: the virtual file drivers
// report "..., errno = 28, error message = 'No space left on device', ...". `frame` is the
// frame's text shortened to what it says before its details ("H5FD__sec2_write(): file write
// failed"), without the time, descriptor and buffer addresses the drivers add.
struct SystemCause {
    int number = 0;
    std::string text;
    std::string frame;
};

std::optional<SystemCause> system_cause(const std::vector<std::string>& stack) {
    for (const auto& frame : stack) {
        const std::size_t at = frame.find("errno = ");
        if (at == std::string::npos) continue;
        SystemCause cause;
        cause.number = std::atoi(frame.c_str() + at + 8);
        if (cause.number <= 0) continue;
        const std::string marker = "error message = '";
        const std::size_t text = frame.find(marker, at);
        const std::size_t end = text == std::string::npos ? text : frame.find('\'', text + marker.size());
        cause.text = end != std::string::npos ? frame.substr(text + marker.size(), end - text - marker.size())
                                               : std::string(std::strerror(cause.number));
        std::size_t cut = std::min(frame.find(": time = "), frame.find(", "));
        cut = std::min(cut, frame.find(", errno"));
        cause.frame = frame.substr(0, std::min(cut, at));
        while (!cause.frame.empty() && (cause.frame.back() == ' ' || cause.frame.back() == ',')) cause.frame.pop_back();
        return cause;
    }
    return std::nullopt;
}

std::string system_hint(int number) {
    switch (number) {
        case ENOSPC: return "hint: the file system is full; free space there or write to another file system";
        case EDQUOT: return "hint: the disk quota is exhausted; free space or write to another file system";
        case EFBIG:
            return "hint: the file reached a file-size limit (ulimit -f / RLIMIT_FSIZE) or the file system's largest "
                   "file size";
        case EROFS: return "hint: the file system is mounted read-only; write to another directory";
        case EACCES:
        case EPERM: return "hint: check the permissions of the file and its directory";
        default: return "";
    }
}

std::string lock_hint(int number) {
    if (number == EAGAIN || number == EWOULDBLOCK) {
        return "hint: another process has the file open for writing and HDF5 locked it (an h5py File in mode 'a', "
               "'r+' or 'w'?); close it there first, or, only if nothing writes it any more (a lock stranded on NFS "
               "or Lustre), set HDF5_USE_FILE_LOCKING=FALSE";
    }
    if (number == ENOLCK || number == ENOSYS || number == EOPNOTSUPP || number == EINVAL) {
        return "hint: this file system does not support file locks (common on NFS and Lustre); set "
               "HDF5_USE_FILE_LOCKING=FALSE";
    }
    return file_locking_hint;
}

constexpr const char* debug_variable = "ATTNBATCH_DEBUG";

bool show_whole_stack() {
    const char* debug = std::getenv(debug_variable);
    return debug && *debug && std::string(debug) != "0";
}

// MPI-IO reports a failed write without the system's reason (ROMIO keeps errno to itself), so
// a write past a file-size limit (ulimit -f) would read as a bare "Write failed". The limit is
// the one cause this process can see for itself.
std::string mpi_io_write_hint(const std::vector<std::string>& stack) {
    bool mpi_io_write = false;
    for (const auto& frame : stack) mpi_io_write = mpi_io_write || frame.rfind("H5FD__mpio_write", 0) == 0;
    struct rlimit limit {};
    if (!mpi_io_write || ::getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return "";
    return "hint: MPI-IO does not say why; this process has a file-size limit (ulimit -f / RLIMIT_FSIZE) of " +
           std::to_string(limit.rlim_cur) + " bytes, which a write past it breaks";
}

// The deepest frame that is not the plugin search HDF5 runs after a failure (its frames say
// which directories it looked in, not what went wrong).
const std::string& innermost_cause(const std::vector<std::string>& stack) {
    for (auto frame = stack.rbegin(); frame != stack.rend(); ++frame) {
        if (frame->rfind("H5PL", 0) != 0) return *frame;
    }
    return stack.front();
}

std::string build_message(const std::string& call, const Where& where, const std::vector<std::string>& stack,
                          bool lock_failure) {
    std::ostringstream out;
    out << call << " failed on " << where.file;
    if (!where.object.empty() && where.object != "/") out << ':' << where.object;
    const std::optional<SystemCause> cause = system_cause(stack);
    if (stack.empty()) {
        out << " (HDF5 left no error stack)";
    } else if (cause) {
        // The whole stack of a failed write runs to thousands of characters; what the user
        // needs is what HDF5 was doing and what the system said (stack() keeps the rest).
        out << ": " << stack.front();
        if (stack.size() > 1) out << " <- ... <- " << cause->frame;
        out << ": " << cause->text << " (errno " << cause->number << ")";
        const std::string hint = lock_failure ? lock_hint(cause->number) : system_hint(cause->number);
        if (!hint.empty()) out << "; " << hint;
        return out.str();
    } else if (show_whole_stack()) {
        out << ": ";
        for (std::size_t i = 0; i < stack.size(); ++i) out << (i ? " <- " : "") << stack[i];
    } else {
        // The API call and the innermost frame that says why; the rest (often a dozen frames,
        // a thousand characters) only with ATTNBATCH_DEBUG=1.
        out << ": " << stack.front();
        const std::string& why = innermost_cause(stack);
        if (&why != &stack.front()) out << " <- ... <- " << why;
        out << " [" << debug_variable << "=1 shows HDF5's whole error stack]";
    }
    if (lock_failure) out << "; " << file_locking_hint;
    const std::string write_hint = mpi_io_write_hint(stack);
    if (!write_hint.empty()) out << "; " << write_hint;
    return out.str();
}

bool mentions_locking(const std::vector<std::string>& stack) {
    for (const auto& frame : stack) {
        if (frame.find("unable to lock file") != std::string::npos) return true;
    }
    return false;
}

}  // namespace

H5Error::H5Error(std::string call, Where where, std::vector<std::string> stack)
    : Error(exit_io, build_message(call, where, stack, mentions_locking(stack))),
      call_(std::move(call)),
      where_(std::move(where)),
      stack_(std::move(stack)) {}

std::string H5Error::stack_text() const {
    std::string text;
    for (const auto& frame : stack_) text += frame + '\n';
    return text;
}

bool H5Error::is_lock_failure() const noexcept { return mentions_locking(stack_); }

namespace detail {

void quiet_hdf5_errors() {
    static std::once_flag once;
    std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

void throw_h5_error(const char* call, const Where& where) {
    // Take the stack first: any further HDF5 call would clear it.
    std::vector<std::string> frames;
    const hid_t stack = H5Eget_current_stack();
    if (stack >= 0) {
        H5Ewalk2(stack, H5E_WALK_DOWNWARD, collect_frame, &frames);
        H5Eclose_stack(stack);
    }
    throw H5Error(call, where, std::move(frames));
}

}  // namespace detail
}  // namespace attnbatch::io
