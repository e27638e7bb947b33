// The seam between the coordinator and MPI: the few operations a distributed run needs, so
// that the coordinator runs (and is unit-tested) in one process with a serial or threaded
// implementation, and MPI tests cover only what is truly distributed.
//
// Every operation except send/recv is collective: every rank calls it, in the same order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attnbatch/io/h5/file_access.hpp"

namespace attnbatch::distributed {

class Comm {
public:
    virtual ~Comm() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;

    virtual void barrier() = 0;
    virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
    virtual std::int64_t max(std::int64_t value) = 0;  // over all ranks
    virtual double max(double value) = 0;
    virtual double sum(double value) = 0;
    // Every rank's value, in rank order, on every rank.
    virtual std::vector<double> all_gather(const std::vector<double>& values) = 0;

    // Point to point, blocking; any size (split into messages MPI can count).
    virtual void send(const void* data, std::size_t bytes, int destination, int tag) = 0;
    virtual void recv(void* data, std::size_t bytes, int source, int tag) = 0;

    // Ends every rank of the job now with `code`: for failures inside collective operations,
    // where the other ranks may already wait for this one.
    [[noreturn]] virtual void abort(int code) = 0;

    // How every rank opens one file together (--io parallel): MPI-IO over this communicator.
    // The default, for communicators without MPI, opens the file on its own.
    virtual io::FileAccess collective_file_access() const { return {}; }

    // How many ranks of this communicator share this rank's node (its memory and cores). The
    // default, for communicators without MPI, is 1.
    virtual int ranks_on_node() const { return 1; }
    // The nodes the communicator spans, numbered 0.. in the order of their lowest rank, and
    // this rank's. The defaults, for communicators without MPI: one node.
    virtual int node_count() const { return 1; }
    virtual int node_index() const { return 0; }

    // Says whether this rank's compute threads are idle (between steps), so that its waits
    // may poll for a while before they sleep: a sleeping wait ends up to a millisecond after
    // the others arrive, and a round waits several times. The default, for communicators
    // whose waits do not sleep, ignores it.
    virtual void set_compute_idle(bool idle) { (void)idle; }

    bool is_root() const { return rank() == 0; }
};

// One rank, no MPI: collectives return their argument.
std::unique_ptr<Comm> make_serial_comm();

void broadcast_string(Comm& comm, std::string& text, int root);

template <class T>
void broadcast_vector(Comm& comm, std::vector<T>& values, int root) {
    std::uint64_t count = values.size();
    comm.broadcast(&count, sizeof count, root);
    values.resize(static_cast<std::size_t>(count));
    if (count > 0) comm.broadcast(values.data(), values.size() * sizeof(T), root);
}

template <class T>
void send_vector(Comm& comm, const std::vector<T>& values, int destination, int tag) {
    if (!values.empty()) comm.send(values.data(), values.size() * sizeof(T), destination, tag);
}

// The receiver knows the size: `values` is already sized.
template <class T>
void recv_vector(Comm& comm, std::vector<T>& values, int source, int tag) {
    if (!values.empty()) comm.recv(values.data(), values.size() * sizeof(T), source, tag);
}

}  // namespace attnbatch::distributed
