#include "attnbatch/distributed/node_resources.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

namespace attnbatch::distributed {
namespace {

// A cgroup limit file holds a byte count, or "max" (v2) or a huge number (v1) for none.
std::uint64_t read_limit(const std::string& path) {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text) || text == "max") return std::numeric_limits<std::uint64_t>::max();
    try {
        return std::stoull(text);
    } catch (const std::exception&) {
        return std::numeric_limits<std::uint64_t>::max();
    }
}

// The memory limit of this process's cgroup: v2 ("0::/path" in /proc/self/cgroup, memory.max)
// or v1 (the memory controller's path, memory.limit_in_bytes).
std::uint64_t cgroup_memory_limit() {
    std::uint64_t limit = std::numeric_limits<std::uint64_t>::max();
    std::ifstream cgroups("/proc/self/cgroup");
    std::string line;
    while (std::getline(cgroups, line)) {
        const std::size_t first = line.find(':'), second = line.find(':', first + 1);
        if (first == std::string::npos || second == std::string::npos) continue;
        const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
        if (controllers.empty()) {
            limit = std::min({limit, read_limit("/sys/fs/cgroup" + path + "/memory.max"), read_limit("/sys/fs/cgroup/memory.max")});
        } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
            limit = std::min({limit, read_limit("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes"),
                              read_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes")});
        }
    }
    return limit;
}

}  // namespace

NodeResources node_resources() {
    NodeResources node;
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    node.memory = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                                        : std::uint64_t{4} << 30;
    node.memory = std::min(node.memory, cgroup_memory_limit());
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

}  // namespace attnbatch::distributed
