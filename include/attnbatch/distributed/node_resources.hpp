// What the node a rank runs on offers: memory and cores, for the defaults and warnings of a
// run whose ranks share nodes, and how the job's ranks fall on its nodes. Plain POSIX and
// Linux files; which ranks share a node comes from the Comm seam (an MPI shared-memory split).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attnbatch/distributed/comm.hpp"

namespace attnbatch::distributed {

enum class MemorySource { meminfo, cgroup };
const char* name_of(MemorySource source);  // "meminfo", "cgroup"

struct NodeResources {
    // The node's own limit: the memory limit of the process's cgroup (Slurm's job cgroup, a
    // container) where one is set, else the node's physical memory (MemTotal).
    std::uint64_t memory = 0;
    MemorySource memory_source = MemorySource::meminfo;
    int cores = 1;          // online cores of the node
    int affinity_cores = 1; // cores this process may run on (its CPU affinity: mpirun's binding)
};

// Where node_resources() reads; tests point it at files of their own.
struct SystemFiles {
    std::string proc_self_cgroup = "/proc/self/cgroup";
    std::string cgroup_root = "/sys/fs/cgroup";  // v1 hierarchies below it, or v2 (also at unified/)
    std::string meminfo = "/proc/meminfo";
};

NodeResources node_resources(const SystemFiles& files = {});

// The default --max-memory: a quarter of the node's memory for each of the ranks sharing it.
std::size_t default_max_memory(const NodeResources& node, int ranks_on_node);

// One node of the job. Its memory budget is shared by its own ranks only.
struct NodeShare {
    std::string name;        // the host name of its first rank; empty past kNamedNodes nodes
    int first_rank = 0;      // its lowest rank
    int ranks = 0;
    int cores = 1;
    std::uint64_t memory = 0;
    MemorySource memory_source = MemorySource::meminfo;
};

// Nodes named in a job's description; a bigger job is summarised, not listed.
constexpr int kNamedNodes = 16;

// Collective: the job's nodes in node order (as Comm::node_index numbers them), the same on
// every rank.
std::vector<NodeShare> node_shares(Comm& comm, const NodeResources& mine);

}  // namespace attnbatch::distributed
