#include "attnbatch/io/output/fault_injection.hpp"

#include "attnbatch/error.hpp"

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <unistd.h>
#include <vector>

namespace attnbatch::io {
namespace {

enum class Action { none, throw_exception, exit_process, kill_process, signal_process };

struct Fault {
    Action action = Action::none;
    std::string site;
    std::int64_t at = 1;
    std::int64_t visits = 0;
};

Fault armed;

const char* const kSites[] = {"after_unit", "before_flush", "after_flush", "before_rename",
                              // the phases of a run, struck on entering them (distributed/stop_request.hpp)
                              "validation", "lengths", "resume_verification", "planning", "value_scan",
                              "output_creation", "rounds", "final_flush", "publish"};

std::vector<std::string> split(const std::string& text, char separator) {
    std::vector<std::string> parts;
    std::size_t begin = 0;
    for (;;) {
        const std::size_t end = text.find(separator, begin);
        parts.push_back(text.substr(begin, end - begin));
        if (end == std::string::npos) return parts;
        begin = end + 1;
    }
}

[[noreturn]] void malformed(const std::string& value, const std::string& what) {
    throw Error(exit_usage, "ATTNBATCH_FAULT='" + value + "': " + what +
                                "; expected RANK:SITE[:K]:ACTION with SITE after_unit, before_flush, after_flush, "
                                "before_rename or a phase (validation, lengths, resume_verification, planning, "
                                "value_scan, output_creation, rounds, final_flush, publish) and ACTION throw, exit, "
                                "kill or signal");
}

std::int64_t parse_count(const std::string& value, const std::string& text) {
    char* end = nullptr;
    const long long count = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || count < 1) malformed(value, "K '" + text + "' is not a positive integer");
    return count;
}

}  // namespace

void arm_fault_from_environment(int rank) {
    armed = Fault{};
    const char* raw = std::getenv("ATTNBATCH_FAULT");
    if (raw == nullptr || *raw == '\0') return;
    const std::string value = raw;
    const std::vector<std::string> parts = split(value, ':');
    if (parts.size() != 3 && parts.size() != 4) malformed(value, "wrong number of fields");
    if (parts[0] != "*" && parts[0] != std::to_string(rank)) {
        if (parts[0].empty() || parts[0].find_first_not_of("0123456789") != std::string::npos) {
            malformed(value, "RANK '" + parts[0] + "' is neither a number nor *");
        }
    }
    bool known = false;
    for (const char* site : kSites) known = known || parts[1] == site;
    if (!known) malformed(value, "unknown SITE '" + parts[1] + "'");
    Fault fault;
    fault.site = parts[1];
    if (parts.size() == 4) fault.at = parse_count(value, parts[2]);
    const std::string& action = parts.back();
    if (action == "throw") fault.action = Action::throw_exception;
    else if (action == "exit") fault.action = Action::exit_process;
    else if (action == "kill") fault.action = Action::kill_process;
    else if (action == "signal") fault.action = Action::signal_process;
    else malformed(value, "unknown ACTION '" + action + "'");
    if (parts[0] == "*" || parts[0] == std::to_string(rank)) armed = fault;
}

void fault_point(const char* site, std::int64_t count) {
    if (armed.action == Action::none || armed.site != site) return;
    const std::int64_t reached = count >= 0 ? count : ++armed.visits;
    if (reached < armed.at) return;
    const Action action = armed.action;
    armed.action = Action::none;  // once
    switch (action) {
        case Action::throw_exception: throw std::runtime_error(std::string("injected fault at ") + site);
        case Action::exit_process: _exit(exit_internal);
        case Action::kill_process: ::raise(SIGKILL); break;
        case Action::signal_process: ::raise(SIGTERM); break;
        case Action::none: break;
    }
}

}  // namespace attnbatch::io
