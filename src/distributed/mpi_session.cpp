#include "attnbatch/distributed/mpi_session.hpp"

#include <mpi.h>

#include <cstdlib>

#include "attnbatch/io/mpi_io.hpp"
#include "mpi_comm.hpp"

namespace attnbatch::distributed {

namespace {

// One process under MPI: no MPI traffic for collectives, but files opened for --io parallel
// still go through MPI-IO (the parallel write path needs the mpio driver, and its bytes must
// be those of a many-rank run).
class SingleRankComm final : public Comm {
public:
    SingleRankComm() : serial_(make_serial_comm()) {}
    int rank() const override { return 0; }
    int size() const override { return 1; }
    void barrier() override {}
    void broadcast(void* data, std::size_t bytes, int root) override { serial_->broadcast(data, bytes, root); }
    std::int64_t max(std::int64_t value) override { return value; }
    double max(double value) override { return value; }
    double sum(double value) override { return value; }
    std::vector<double> all_gather(const std::vector<double>& values) override { return values; }
    void send(const void* data, std::size_t bytes, int destination, int tag) override {
        serial_->send(data, bytes, destination, tag);
    }
    void recv(void* data, std::size_t bytes, int source, int tag) override { serial_->recv(data, bytes, source, tag); }
    [[noreturn]] void abort(int code) override {
        serial_->abort(code);
        std::_Exit(code);  // not reached; virtual calls do not carry [[noreturn]]
    }
    io::FileAccess collective_file_access() const override { return io::mpi_io_access(MPI_COMM_WORLD); }

private:
    std::unique_ptr<Comm> serial_;
};

}  // namespace

MpiSession::MpiSession() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
        // The main thread waits in MPI while the compute thread works: waiting must yield the
        // core rather than spin on it. Only a default; the user's setting wins.
        ::setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
        int provided = 0;
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
        owned_ = true;
    }
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
}

MpiSession::~MpiSession() {
    if (owned_) MPI_Finalize();
}

std::unique_ptr<Comm> MpiSession::world() const {
    if (size_ > 1) return make_mpi_comm(MPI_COMM_WORLD);
    return std::make_unique<SingleRankComm>();
}

}  // namespace attnbatch::distributed
