// MPI's lifetime for one command: initialised with the thread level the job needs, finalised
// when the command ends. Callers see only the Comm seam, never an MPI type.
#pragma once

#include <memory>

#include "attnbatch/distributed/comm.hpp"

namespace attnbatch::distributed {

class MpiSession {
public:
    // MPI_Init_thread with MPI_THREAD_FUNNELED: the compute runs on a thread of its own, but
    // only the main thread calls MPI (and HDF5). Does nothing when MPI is already initialised.
    MpiSession();
    ~MpiSession();  // MPI_Finalize, if this session initialised MPI
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;

    int size() const noexcept { return size_; }
    int rank() const noexcept { return rank_; }
    // Every rank of the job: the serial Comm for a single process (no MPI traffic at all),
    // else MPI over MPI_COMM_WORLD. Valid until this session ends.
    std::unique_ptr<Comm> world() const;

private:
    bool owned_ = false;
    int size_ = 1, rank_ = 0;
};

}  // namespace attnbatch::distributed
