// Run under mpirun: rank 0 finds the job's messaging layer and transports the quick way (the
// component objects Open MPI still has loaded) and from MPI_T, prints both, and exits 1 when
// they differ. Both are asked as for a job on two nodes with every rank of this one on the
// first: so that network and shared-memory transports both count.
#include <iostream>
#include <string>

#include "attnbatch/distributed/mpi_session.hpp"

namespace {

std::string text(const attnbatch::distributed::Messaging& m) {
    std::string out = m.library + " | " + m.layer + " |";
    for (const std::string& transport : m.transports) out += " " + transport;
    return out;
}

}  // namespace

int main() {
    attnbatch::distributed::MpiSession mpi;
    int status = 0;
    if (mpi.rank() == 0) {
        const auto quick = mpi.messaging(2, mpi.size());
        const auto mpi_t = mpi.messaging(2, mpi.size(), true);
        std::cout << "loaded objects: " << text(quick) << "\nMPI_T:          " << text(mpi_t) << '\n';
        if (quick.layer.empty()) {
            std::cout << "no messaging layer found\n";
            status = 1;
        } else if (text(quick) != text(mpi_t)) {
            std::cout << "the two differ\n";
            status = 1;
        }
    }
    mpi.world()->barrier();
    return status;
}
