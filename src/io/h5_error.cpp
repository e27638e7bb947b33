// Capturing HDF5's error stack as text, and the H5Error message built from it.
#include "attnbatch/io/h5_error.hpp"

#include "h5_check.hpp"

#include <mutex>
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

std::string build_message(const std::string& call, const Where& where, const std::vector<std::string>& stack,
                          bool lock_failure) {
    std::ostringstream out;
    out << call << " failed on " << where.file;
    if (!where.object.empty() && where.object != "/") out << ':' << where.object;
    if (stack.empty()) {
        out << " (HDF5 left no error stack)";
    } else {
        out << ": ";
        for (std::size_t i = 0; i < stack.size(); ++i) out << (i ? " <- " : "") << stack[i];
    }
    if (lock_failure) out << "; " << file_locking_hint;
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
    : std::runtime_error(build_message(call, where, stack, mentions_locking(stack))),
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
