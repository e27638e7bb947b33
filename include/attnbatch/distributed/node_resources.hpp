// What the node a rank runs on offers: memory and cores, for the defaults and warnings of a
// run whose ranks share nodes. Plain POSIX and Linux files; how many ranks share the node
// comes from the Comm seam (Comm::ranks_on_node, an MPI shared-memory split).
#pragma once

#include <cstddef>
#include <cstdint>

namespace attnbatch::distributed {

struct NodeResources {
    // Physical memory, or the memory limit of the process's cgroup (Slurm, containers) when lower.
    std::uint64_t memory = 0;
    int cores = 1;          // online cores of the node
    int affinity_cores = 1; // cores this process may run on (its CPU affinity: mpirun's binding)
};

NodeResources node_resources();

// The default --max-memory: a quarter of the node's memory for each of the ranks sharing it.
std::size_t default_max_memory(const NodeResources& node, int ranks_on_node);

}  // namespace attnbatch::distributed
