// Agreeing on failures across ranks. Open MPI hangs a job when one rank leaves while the
// others wait in a collective, so no rank acts on a failure alone: each records its own
// outcome, the ranks agree at the next agreement point (the lowest failing rank's code and
// message win), and every rank then leaves through the same door with the same exit code.
#pragma once

#include <new>
#include <string>
#include <utility>

#include "attnbatch/distributed/comm.hpp"
#include "attnbatch/error.hpp"

namespace attnbatch::distributed {

// An error every rank agreed on (same code on all ranks, message from the lowest failing
// rank): every rank leaves the run with it, rank 0 prints it.
struct AgreedError {
    int code = 0;
    std::string message;
};

// Collective. Each rank passes its own outcome (code 0: fine). Returns the outcome of the
// lowest-numbered failing rank, or code 0 when every rank is fine.
AgreedError agree(Comm& comm, int code, const std::string& message);

// Thrown on every rank, at the same point, once the ranks agreed on a failure.
class AgreedFailure : public Error {
public:
    using Error::Error;
};

// Throws AgreedFailure on every rank when any rank failed; returns otherwise.
void agree_or_throw(Comm& comm, int code, const std::string& message);

// A failure of this rank that the next agreement will spread: the first one is kept.
struct LocalFailure {
    int code = 0;
    std::string message;
    void set(int c, const std::string& m) {
        if (code == 0) {
            code = c;
            message = m;
        }
    }
    explicit operator bool() const { return code != 0; }
};

// Runs `work`; an Error (io's included) or running out of memory becomes this rank's failure
// instead of an exception. Anything else is a bug and goes on up.
template <class Work>
void record_failure(LocalFailure& failure, Work&& work) {
    try {
        std::forward<Work>(work)();
    } catch (const AgreedFailure&) {
        throw;
    } catch (const Error& e) {
        failure.set(e.exit_code(), e.what());
    } catch (const std::bad_alloc&) {
        failure.set(exit_out_of_memory, out_of_memory_message);
    }
}

// For a failure that cannot be agreed on (inside a collective write, where the other ranks
// may already wait for this one): prints "attnbatch run: error: rank R: <message>" and ends
// every rank of the job with `code`.
[[noreturn]] void abort_job(Comm& comm, int code, const std::string& message);

// Collective. Runs `work` on the ranks where `here` is true, then agrees: a failure on any
// rank throws AgreedFailure on all of them.
template <class Work>
void agreed(Comm& comm, bool here, Work&& work) {
    LocalFailure failure;
    if (here) record_failure(failure, std::forward<Work>(work));
    agree_or_throw(comm, failure.code, failure.message);
}

}  // namespace attnbatch::distributed
