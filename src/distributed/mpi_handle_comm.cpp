#include "attnbatch/distributed/handle_comm.hpp"

#include <mpi.h>

#include <stdexcept>

#include "mpi_comm.hpp"

namespace attnbatch::distributed {

namespace {

// Owns the duplicate; the Comm over it is destroyed first.
class DuplicateComm final : public Comm {
public:
    explicit DuplicateComm(MPI_Comm original) {
        MPI_Comm_dup(original, &duplicate_);
        comm_ = make_mpi_comm(duplicate_);
    }
    ~DuplicateComm() override {
        comm_.reset();
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Comm_free(&duplicate_);
    }
    DuplicateComm(const DuplicateComm&) = delete;
    DuplicateComm& operator=(const DuplicateComm&) = delete;

    int rank() const override { return comm_->rank(); }
    int size() const override { return comm_->size(); }
    void barrier() override { comm_->barrier(); }
    void broadcast(void* data, std::size_t bytes, int root) override { comm_->broadcast(data, bytes, root); }
    std::int64_t max(std::int64_t value) override { return comm_->max(value); }
    double max(double value) override { return comm_->max(value); }
    double sum(double value) override { return comm_->sum(value); }
    std::vector<double> all_gather(const std::vector<double>& values) override { return comm_->all_gather(values); }
    void send(const void* data, std::size_t bytes, int destination, int tag) override { comm_->send(data, bytes, destination, tag); }
    void recv(void* data, std::size_t bytes, int source, int tag) override { comm_->recv(data, bytes, source, tag); }
    [[noreturn]] void abort(int code) override {
        comm_->abort(code);
        std::_Exit(code);  // not reached
    }
    io::FileAccess collective_file_access() const override { return comm_->collective_file_access(); }
    int ranks_on_node() const override { return comm_->ranks_on_node(); }
    int node_count() const override { return comm_->node_count(); }
    int node_index() const override { return comm_->node_index(); }
    void set_compute_idle(bool idle) override { comm_->set_compute_idle(idle); }

private:
    MPI_Comm duplicate_ = MPI_COMM_NULL;
    std::unique_ptr<Comm> comm_;
};

}  // namespace

std::unique_ptr<Comm> comm_over_handle(const void* mpi_comm_address) {
    if (mpi_comm_address == nullptr) throw std::invalid_argument("comm_over_handle: no communicator");
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) throw std::logic_error("comm_over_handle: MPI is not initialised");
    return std::make_unique<DuplicateComm>(*static_cast<const MPI_Comm*>(mpi_comm_address));
}

}  // namespace attnbatch::distributed
