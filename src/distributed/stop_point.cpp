#include "attnbatch/distributed/stop_point.hpp"

#include "attnbatch/error.hpp"

namespace attnbatch::distributed {

std::string stop_message(int signal, Phase phase, std::int64_t sequences_written) {
    return std::string("interrupted by ") + signal_name(signal) + " during " + name_of(phase) + " after " +
           std::to_string(sequences_written) + " sequences were written; resume with --resume";
}

void stop_point(Comm& comm) {
    const int signal = stop_signal();
    agree_or_throw(comm, signal != 0 ? exit_interrupted : 0, signal != 0 ? stop_message(signal, stop_phase(), 0) : std::string());
}

void begin_phase(Comm& comm, Phase next) {
    stop_point(comm);
    enter_phase(next);
}

}  // namespace attnbatch::distributed
