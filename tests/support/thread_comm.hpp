// ThreadComm: a Comm whose P ranks are P threads of one process, for testing the coordinator
// without MPI. Every operation of the seam is implemented on shared state:
//   collectives  one generation-counted rendezvous per call: each rank leaves its contribution
//                in its slot, the last to arrive checks that every rank called the same
//                operation (same kind, root and byte count, as MPI requires) and publishes the
//                slots; each rank copies what it needs before the next rendezvous can start;
//   send/recv    per-(source, destination, tag) FIFO mailboxes of byte vectors; a receive
//                must ask for exactly the size that was sent (stricter than MPI, which
//                accepts a larger buffer). Sends are buffered unless `synchronous_sends`,
//                which makes a send wait until its message is received (MPI's rendezvous
//                protocol for large messages: catches send/send deadlocks);
//   abort        records the code and throws CommAborted on the calling rank; every other
//                rank then leaves its next (or current) wait with CommAborted too.
// Zero-byte sends and receives do nothing, like the MPI implementation's loops over pieces.
//
// A wait longer than `deadlock_seconds` is reported as a deadlock (CommDeadlock on every rank)
// instead of hanging the test.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnbatch/distributed/comm.hpp"

namespace attnbatch::testing {

// Thrown on the rank that called abort(code), and on every other rank when it next waits
// (those carry the aborting rank's code too, with `secondary` set).
class CommAborted : public std::runtime_error {
public:
    CommAborted(int rank, int code, bool secondary)
        : std::runtime_error("rank " + std::to_string(rank) + " aborted with code " + std::to_string(code)),
          rank_(rank), code_(code), secondary_(secondary) {}
    int rank() const noexcept { return rank_; }
    int code() const noexcept { return code_; }
    bool secondary() const noexcept { return secondary_; }

private:
    int rank_, code_;
    bool secondary_;
};

// Ranks that disagree on a collective (different operations, roots or sizes), a receive of
// the wrong size, a deadlock, or another rank's failure while this one waits.
class CommError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct ThreadCommOptions {
    bool synchronous_sends = false;
    double deadlock_seconds = 10.0;
};

class ThreadWorld;

// The communicator of one rank of a world; used only by that rank's thread.
class ThreadComm final : public distributed::Comm {
public:
    ThreadComm(std::shared_ptr<ThreadWorld> world, int rank);
    int rank() const override { return rank_; }
    int size() const override;
    void barrier() override;
    void broadcast(void* data, std::size_t bytes, int root) override;
    std::int64_t max(std::int64_t value) override;
    double max(double value) override;
    double sum(double value) override;
    std::vector<double> all_gather(const std::vector<double>& values) override;
    void send(const void* data, std::size_t bytes, int destination, int tag) override;
    void recv(void* data, std::size_t bytes, int source, int tag) override;
    [[noreturn]] void abort(int code) override;

    // Collectives this rank has completed (to check that ranks made the same calls).
    std::int64_t collectives() const noexcept { return collectives_; }

private:
    std::shared_ptr<ThreadWorld> world_;
    int rank_;
    std::int64_t collectives_ = 0;
};

// Runs body(comm) on P threads, one rank each, and joins them. Rethrows the first failure
// (in time) that was not merely another rank's failure seen from a wait; when a rank fails,
// the others are released from their waits so that the call always returns.
void run_ranks(int ranks, const std::function<void(distributed::Comm&)>& body, const ThreadCommOptions& options = {});

}  // namespace attnbatch::testing
