// MPI's lifetime for one command: initialised with the thread level the job needs, finalised
// when the command ends. Callers see only the Comm seam, never an MPI type.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attnbatch/distributed/comm.hpp"

namespace attnbatch::distributed {

// Which of the MPI library's messaging layers carries the job's messages, and over what: what
// Open MPI kept open after MPI_Init (the components still loaded, or its MPI_T control
// variables where the components are not objects of their own).
struct Messaging {
    std::string library;                   // "Open MPI v4.1.4": MPI_Get_library_version's first part
    std::string layer;                     // Open MPI's pml: "ob1", "cm", "ucx"; empty when unknown
    std::string chosen_by;  // "attnbatch's one-node default", "OMPI_MCA_pml", "an Open MPI parameter file", "Open MPI"
    std::vector<std::string> transports;   // ob1's byte transfer layers between ranks: "tcp", "vader"
};

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
    // Not collective (this process's loaded objects, or MPI_T queries): the layer in use and,
    // of its transports, those that carry messages in this job: shared memory where a node has
    // several ranks, the network where the job spans several nodes. `ask_mpi_t`: from MPI_T
    // alone (0.2 s here), which the quick answer must agree with (tests/distributed).
    Messaging messaging(int node_count, int largest_node, bool ask_mpi_t = false) const;

private:
    bool owned_ = false;
    std::string pml_chosen_by_;  // before MPI_Init: who chose the messaging layer
    int size_ = 1, rank_ = 0;
    int watchdog_ = -1;  // this rank's launcher watchdog (launcher_watchdog.hpp), -1: none
    std::string private_session_directory_;  // a singleton's Open MPI session files, removed at the end
};

}  // namespace attnbatch::distributed
