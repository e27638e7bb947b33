#include "attnbatch/distributed/node_resources.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <limits>
#include <string>

namespace attnbatch::distributed {
namespace {

constexpr std::uint64_t kNoLimit = std::numeric_limits<std::uint64_t>::max();

// A cgroup limit file holds a byte count, or "max" (v2) or a huge number (v1) for none.
std::uint64_t read_limit(const std::string& path) {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text) || text == "max") return kNoLimit;
    try {
        return std::stoull(text);
    } catch (const std::exception&) {
        return kNoLimit;
    }
}

// The smallest `file` limit from the cgroup `path` up to the hierarchy's root `mount`: a
// limit set on a parent (a job's cgroup above its step's, a node's above its processes')
// binds every cgroup below it.
std::uint64_t limit_up_the_tree(const std::string& mount, std::string path, const char* file) {
    std::uint64_t limit = kNoLimit;
    while (true) {
        limit = std::min(limit, read_limit(mount + path + "/" + file));
        if (path.empty() || path == "/") return limit;
        path.erase(path.find_last_of('/'));
    }
}

// The memory limit of this process's cgroup: v2 ("0::/path", memory.max, its hierarchy at the
// root or at unified/ on hybrid systems) or v1 (the memory controller's path,
// memory.limit_in_bytes).
std::uint64_t cgroup_memory_limit(const SystemFiles& files) {
    std::uint64_t limit = kNoLimit;
    std::ifstream cgroups(files.proc_self_cgroup);
    std::string line;
    while (std::getline(cgroups, line)) {
        const std::size_t first = line.find(':'), second = line.find(':', first + 1);
        if (first == std::string::npos || second == std::string::npos) continue;
        const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
        if (controllers.empty()) {
            for (const std::string& mount : {files.cgroup_root, files.cgroup_root + "/unified"}) {
                if (std::ifstream(mount + "/cgroup.controllers")) limit = std::min(limit, limit_up_the_tree(mount, path, "memory.max"));
            }
        } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
            limit = std::min(limit, limit_up_the_tree(files.cgroup_root + "/memory", path, "memory.limit_in_bytes"));
        }
    }
    return limit;
}

// MemTotal of /proc/meminfo; 0 when it cannot be read.
std::uint64_t meminfo_total(const std::string& meminfo) {
    std::ifstream in(meminfo);
    std::string key, unit;
    std::uint64_t value = 0;
    while (in >> key >> value) {
        std::getline(in, unit);
        if (key == "MemTotal:") return value * (unit.find("kB") != std::string::npos ? 1024 : 1);
    }
    return 0;
}

std::string host_name() {
    char name[HOST_NAME_MAX + 1] = {};
    if (::gethostname(name, sizeof name - 1) != 0) return "?";
    return name;
}

}  // namespace

const char* name_of(MemorySource source) { return source == MemorySource::cgroup ? "cgroup" : "meminfo"; }

NodeResources node_resources(const SystemFiles& files) {
    NodeResources node;
    node.memory = meminfo_total(files.meminfo);
    if (node.memory == 0) {
        const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
        node.memory = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                                            : std::uint64_t{4} << 30;
    }
    const std::uint64_t limit = cgroup_memory_limit(files);
    if (limit < node.memory) {
        node.memory = limit;
        node.memory_source = MemorySource::cgroup;
    }
    const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
    node.cores = cores > 0 ? static_cast<int>(cores) : 1;
    cpu_set_t set;
    CPU_ZERO(&set);
    node.affinity_cores = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : node.cores;
    return node;
}

std::size_t default_max_memory(const NodeResources& node, int ranks_on_node) {
    return static_cast<std::size_t>(node.memory / 4 / static_cast<std::uint64_t>(std::max(1, ranks_on_node)));
}

std::vector<NodeShare> node_shares(Comm& comm, const NodeResources& mine) {
    // Bytes travel as doubles: exact up to 2^53 (8 PiB of memory on one node).
    const std::vector<double> all = comm.all_gather({static_cast<double>(comm.node_index()), static_cast<double>(mine.memory),
                                                     static_cast<double>(mine.memory_source == MemorySource::cgroup),
                                                     static_cast<double>(mine.cores)});
    std::vector<NodeShare> nodes(static_cast<std::size_t>(comm.node_count()));
    for (int rank = comm.size() - 1; rank >= 0; --rank) {
        const double* values = &all[static_cast<std::size_t>(rank) * 4];
        NodeShare& node = nodes.at(static_cast<std::size_t>(values[0]));
        node.first_rank = rank;
        node.ranks += 1;
        node.memory = static_cast<std::uint64_t>(values[1]);
        node.memory_source = values[2] != 0 ? MemorySource::cgroup : MemorySource::meminfo;
        node.cores = static_cast<int>(values[3]);
    }
    if (comm.node_count() <= kNamedNodes) {
        for (NodeShare& node : nodes) {
            if (comm.rank() == node.first_rank) node.name = host_name();
            broadcast_string(comm, node.name, node.first_rank);
        }
    }
    return nodes;
}

}  // namespace attnbatch::distributed
