// Where the ranks agree on a stop request (stop_request.hpp): between phases, after every
// slice of a long phase and after every round. Each is collective, so every rank leaves
// through the same door: AgreedFailure with exit 5 and the message of the lowest-numbered
// rank that received the signal:
//
//   interrupted by SIGTERM during value scan after 1200 sequences were written; resume with --resume
//
// A phase that one rank spends alone (rank 0 verifying a partial output) or that takes long
// (each rank scanning its share of the input) runs in slices of bounded work, with a stop
// point after each, so that a stop is answered within about a second at any scale.
#pragma once

#include <cstdint>
#include <string>

#include "attnbatch/distributed/agreement.hpp"
#include "attnbatch/distributed/comm.hpp"
#include "attnbatch/distributed/stop_request.hpp"

namespace attnbatch::distributed {

// The one line a stopped run ends with; `sequences_written` counts what this attempt wrote
// (and recorded as done) before it stopped.
std::string stop_message(int signal, Phase phase, std::int64_t sequences_written);

// Collective, for the phases before the rounds (nothing written yet). When any rank has a
// stop request, throws AgreedFailure(exit_interrupted) on every rank; returns otherwise.
void stop_point(Comm& comm);

// Collective: a stop point, then every rank enters `next`.
void begin_phase(Comm& comm, Phase next);

// Collective. Calls `slice` on the ranks where `here` holds until it returns true (its work
// is done), with an agreement point after every call on every rank: a failure on any rank
// (as agreed() does) or a stop request ends every rank. Ranks with nothing (left) to do wait
// in the agreements.
template <class Slice>
void agreed_in_slices(Comm& comm, bool here, Slice&& slice) {
    bool done = !here;
    for (;;) {
        LocalFailure failure;
        if (!done) record_failure(failure, [&] { done = slice(); });
        agree_or_throw(comm, failure.code, failure.message);
        stop_point(comm);
        if (comm.max(std::int64_t{done ? 0 : 1}) == 0) return;
    }
}

}  // namespace attnbatch::distributed
