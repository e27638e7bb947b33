#include "mpi_comm.hpp"

#include "attnbatch/io/mpi_io.hpp"

#include <algorithm>
#include <climits>

namespace attnbatch::distributed {

namespace {

// MPI counts are int: large buffers go in pieces of at most 1 GiB.
constexpr std::size_t kPiece = std::size_t{1} << 30;

class MpiComm final : public Comm {
public:
    explicit MpiComm(MPI_Comm communicator) : comm_(communicator) {
        MPI_Comm_rank(comm_, &rank_);
        MPI_Comm_size(comm_, &size_);
        // The ranks that can share memory are the ranks of this node.
        MPI_Comm node = MPI_COMM_NULL;
        if (MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node) == MPI_SUCCESS &&
            node != MPI_COMM_NULL) {
            MPI_Comm_size(node, &ranks_on_node_);
            MPI_Comm_free(&node);
        }
    }
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    void barrier() override { MPI_Barrier(comm_); }
    void broadcast(void* data, std::size_t bytes, int root) override {
        auto* p = static_cast<char*>(data);
        for (std::size_t done = 0; done < bytes; done += kPiece) {
            MPI_Bcast(p + done, static_cast<int>(std::min(kPiece, bytes - done)), MPI_BYTE, root, comm_);
        }
    }
    std::int64_t max(std::int64_t value) override {
        std::int64_t result = 0;
        MPI_Allreduce(&value, &result, 1, MPI_INT64_T, MPI_MAX, comm_);
        return result;
    }
    double max(double value) override {
        double result = 0;
        MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, MPI_MAX, comm_);
        return result;
    }
    double sum(double value) override {
        double result = 0;
        MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, MPI_SUM, comm_);
        return result;
    }
    std::vector<double> all_gather(const std::vector<double>& values) override {
        std::vector<double> all(values.size() * static_cast<std::size_t>(size_));
        MPI_Allgather(values.data(), static_cast<int>(values.size()), MPI_DOUBLE, all.data(),
                      static_cast<int>(values.size()), MPI_DOUBLE, comm_);
        return all;
    }
    void send(const void* data, std::size_t bytes, int destination, int tag) override {
        const auto* p = static_cast<const char*>(data);
        for (std::size_t done = 0; done < bytes; done += kPiece) {
            MPI_Send(p + done, static_cast<int>(std::min(kPiece, bytes - done)), MPI_BYTE, destination, tag, comm_);
        }
    }
    void recv(void* data, std::size_t bytes, int source, int tag) override {
        auto* p = static_cast<char*>(data);
        for (std::size_t done = 0; done < bytes; done += kPiece) {
            MPI_Recv(p + done, static_cast<int>(std::min(kPiece, bytes - done)), MPI_BYTE, source, tag, comm_,
                     MPI_STATUS_IGNORE);
        }
    }
    [[noreturn]] void abort(int code) override {
        MPI_Abort(comm_, code);
        std::_Exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
    }
    io::FileAccess collective_file_access() const override { return io::mpi_io_access(comm_); }
    int ranks_on_node() const override { return ranks_on_node_; }

private:
    MPI_Comm comm_;
    int rank_ = 0, size_ = 1, ranks_on_node_ = 1;
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm(MPI_Comm communicator) { return std::make_unique<MpiComm>(communicator); }

}  // namespace attnbatch::distributed
