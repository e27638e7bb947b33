#include "mpi_comm.hpp"

#include "attnbatch/io/h5/mpi_io.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>

namespace attnbatch::distributed {

namespace {

// MPI counts are int: large buffers go in pieces of at most 1 GiB.
constexpr std::size_t kPiece = std::size_t{1} << 30;
constexpr int kSpinTests = 4;
constexpr auto kIdlePoll = std::chrono::milliseconds(2);

// Completes `request` without spinning on a core. A rank that reaches a collective first
// waits there for the others, often for a whole step of their compute; MPI's blocking calls
// poll all that time (yield_when_idle only turns the poll into sched_yield calls), which on a
// node with as many compute threads as cores takes the core from a compute thread. So: a
// short spin for the common quick case, then sleeps growing to 1 ms, which wake a compute
// thread's core at most a thousand times a second and delay the wait's end by at most 1 ms.
// The spin is short because each idle MPI_Test is a sched_yield system call (64 of them per
// wait, two or three waits a round, were 5% of a run's CPU time with 74 rounds).
// With the rank's compute threads idle (set_compute_idle) it polls for up to kIdlePoll first:
// nothing else wants the core then, and the waits at the end of a round are mostly short
// (the other rank's last writes, or the last of its compute). Bounded, so that a rank that
// waits long, or shares its core with another rank (--oversubscribe), still sleeps.
void wait_patiently(MPI_Request& request, bool compute_idle) {
    int done = 0;
    for (int spin = 0; spin < kSpinTests && !done; ++spin) MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (compute_idle && !done) {
        const auto until = std::chrono::steady_clock::now() + kIdlePoll;
        while (!done && std::chrono::steady_clock::now() < until) MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    }
    auto pause = std::chrono::microseconds(20);
    while (!done) {
        std::this_thread::sleep_for(pause);
        pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
        MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    }
}

class MpiComm final : public Comm {
public:
    explicit MpiComm(MPI_Comm communicator) : comm_(communicator) {
        MPI_Comm_rank(comm_, &rank_);
        MPI_Comm_size(comm_, &size_);
        // The ranks that can share memory are the ranks of this node; each node's lowest rank
        // numbers the nodes (in the order of those ranks) and tells the others.
        MPI_Comm node = MPI_COMM_NULL;
        if (MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node) == MPI_SUCCESS &&
            node != MPI_COMM_NULL) {
            MPI_Comm_size(node, &ranks_on_node_);
            int node_rank = 0;
            MPI_Comm_rank(node, &node_rank);
            MPI_Comm leaders = MPI_COMM_NULL;
            MPI_Comm_split(comm_, node_rank == 0 ? 0 : MPI_UNDEFINED, rank_, &leaders);
            int layout[2] = {0, 1};  // this node's index, the node count
            if (leaders != MPI_COMM_NULL) {
                MPI_Comm_rank(leaders, &layout[0]);
                MPI_Comm_size(leaders, &layout[1]);
                MPI_Comm_free(&leaders);
            }
            MPI_Bcast(layout, 2, MPI_INT, 0, node);
            node_index_ = layout[0];
            node_count_ = layout[1];
            MPI_Comm_free(&node);
        }
    }
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    void barrier() override {
        MPI_Request request;
        MPI_Ibarrier(comm_, &request);
        wait_patiently(request, compute_idle_);
    }
    void broadcast(void* data, std::size_t bytes, int root) override {
        auto* p = static_cast<char*>(data);
        for (std::size_t done = 0; done < bytes; done += kPiece) {
            MPI_Request request;
            MPI_Ibcast(p + done, static_cast<int>(std::min(kPiece, bytes - done)), MPI_BYTE, root, comm_, &request);
            wait_patiently(request, compute_idle_);
        }
    }
    std::int64_t max(std::int64_t value) override { return reduce(value, MPI_INT64_T, MPI_MAX); }
    double max(double value) override { return reduce(value, MPI_DOUBLE, MPI_MAX); }
    double sum(double value) override { return reduce(value, MPI_DOUBLE, MPI_SUM); }
    std::vector<double> all_gather(const std::vector<double>& values) override {
        std::vector<double> all(values.size() * static_cast<std::size_t>(size_));
        MPI_Request request;
        MPI_Iallgather(values.data(), static_cast<int>(values.size()), MPI_DOUBLE, all.data(),
                       static_cast<int>(values.size()), MPI_DOUBLE, comm_, &request);
        wait_patiently(request, compute_idle_);
        return all;
    }
    void send(const void* data, std::size_t bytes, int destination, int tag) override {
        const auto* p = static_cast<const char*>(data);
        for (std::size_t done = 0; done < bytes; done += kPiece) {
            MPI_Request request;
            MPI_Isend(p + done, static_cast<int>(std::min(kPiece, bytes - done)), MPI_BYTE, destination, tag, comm_,
                      &request);
            wait_patiently(request, compute_idle_);
        }
    }
    void recv(void* data, std::size_t bytes, int source, int tag) override {
        auto* p = static_cast<char*>(data);
        for (std::size_t done = 0; done < bytes; done += kPiece) {
            MPI_Request request;
            MPI_Irecv(p + done, static_cast<int>(std::min(kPiece, bytes - done)), MPI_BYTE, source, tag, comm_, &request);
            wait_patiently(request, compute_idle_);
        }
    }
    [[noreturn]] void abort(int code) override {
        MPI_Abort(comm_, code);
        std::_Exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
    }
    io::FileAccess collective_file_access() const override { return io::mpi_io_access(comm_); }
    int ranks_on_node() const override { return ranks_on_node_; }
    int node_count() const override { return node_count_; }
    int node_index() const override { return node_index_; }
    void set_compute_idle(bool idle) override { compute_idle_ = idle; }

private:
    template <class T>
    T reduce(T value, MPI_Datatype type, MPI_Op op) {
        T result{};
        MPI_Request request;
        MPI_Iallreduce(&value, &result, 1, type, op, comm_, &request);
        wait_patiently(request, compute_idle_);
        return result;
    }

    MPI_Comm comm_;
    int rank_ = 0, size_ = 1, ranks_on_node_ = 1, node_count_ = 1, node_index_ = 0;
    bool compute_idle_ = false;
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm(MPI_Comm communicator) { return std::make_unique<MpiComm>(communicator); }

}  // namespace attnbatch::distributed
