// A node's memory from its own limits (a cgroup v1 or v2 limit, on the process's cgroup or
// any cgroup above it, else MemTotal), read from file trees made here; and how the ranks of a
// job fall on its nodes (node_shares over thread ranks that claim to sit on several nodes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "attnbatch/distributed/node_resources.hpp"
#include "support/temp_dir.hpp"
#include "support/thread_comm.hpp"

namespace attnbatch::distributed {
namespace {

constexpr std::uint64_t kMemTotal = std::uint64_t{16} << 30;

void write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << text;
}

// A machine with 16 GiB whose process sits in the cgroups `proc_self_cgroup` names.
SystemFiles machine(const testing::TempDir& dir, const std::string& proc_self_cgroup) {
    SystemFiles files{dir.file("proc/self/cgroup"), dir.file("sys/fs/cgroup"), dir.file("proc/meminfo")};
    write(files.proc_self_cgroup, proc_self_cgroup);
    write(files.meminfo, "MemTotal:       " + std::to_string(kMemTotal / 1024) + " kB\nMemFree:  1000 kB\n");
    return files;
}

TEST(NodeResources, WithoutACgroupLimitTheNodeHasItsMemTotal) {
    testing::TempDir dir;
    const SystemFiles files = machine(dir, "0::/\n4:memory:/\n");
    write(files.cgroup_root + "/memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1: no limit
    const NodeResources node = node_resources(files);
    EXPECT_EQ(node.memory, kMemTotal);
    EXPECT_EQ(node.memory_source, MemorySource::meminfo);
    EXPECT_GE(node.cores, 1);
}

TEST(NodeResources, CgroupV1LimitOnAParentBindsTheChild) {
    testing::TempDir dir;
    const SystemFiles files = machine(dir, "5:cpu:/\n4:memory:/job_7/step_0\n");
    write(files.cgroup_root + "/memory/memory.limit_in_bytes", "9223372036854771712\n");
    write(files.cgroup_root + "/memory/job_7/memory.limit_in_bytes", std::to_string(std::uint64_t{3} << 30) + "\n");
    write(files.cgroup_root + "/memory/job_7/step_0/memory.limit_in_bytes", "9223372036854771712\n");
    const NodeResources node = node_resources(files);
    EXPECT_EQ(node.memory, std::uint64_t{3} << 30);
    EXPECT_EQ(node.memory_source, MemorySource::cgroup);
}

TEST(NodeResources, CgroupV2TakesTheSmallestMemoryMaxOnThePath) {
    testing::TempDir dir;
    const SystemFiles files = machine(dir, "0::/node/task\n");
    write(files.cgroup_root + "/cgroup.controllers", "cpu memory\n");
    write(files.cgroup_root + "/node/memory.max", "2147483648\n");
    write(files.cgroup_root + "/node/task/memory.max", "max\n");
    EXPECT_EQ(node_resources(files).memory, std::uint64_t{2} << 30);
}

TEST(NodeResources, CgroupV2OfAHybridSystemIsUnderUnified) {
    testing::TempDir dir;
    const SystemFiles files = machine(dir, "0::/a\n4:memory:/\n");
    write(files.cgroup_root + "/unified/cgroup.controllers", "memory\n");
    write(files.cgroup_root + "/unified/a/memory.max", "1073741824\n");
    const NodeResources node = node_resources(files);
    EXPECT_EQ(node.memory, std::uint64_t{1} << 30);
    EXPECT_EQ(node.memory_source, MemorySource::cgroup);
}

TEST(NodeResources, ALimitAboveThePhysicalMemoryIsNoLimit) {
    testing::TempDir dir;
    const SystemFiles files = machine(dir, "0::/big\n");
    write(files.cgroup_root + "/cgroup.controllers", "memory\n");
    write(files.cgroup_root + "/big/memory.max", std::to_string(kMemTotal * 2) + "\n");
    const NodeResources node = node_resources(files);
    EXPECT_EQ(node.memory, kMemTotal);
    EXPECT_EQ(node.memory_source, MemorySource::meminfo);
}

TEST(NodeResources, DefaultBudgetIsAQuarterOfTheNodeSharedByItsRanks) {
    NodeResources node;
    node.memory = std::uint64_t{8} << 30;
    EXPECT_EQ(default_max_memory(node, 1), std::size_t{2} << 30);
    EXPECT_EQ(default_max_memory(node, 4), std::size_t{512} << 20);
}

// Thread ranks that say they sit on the nodes `node_of` gives them.
class NodesComm final : public Comm {
public:
    NodesComm(Comm& inner, std::vector<int> node_of) : inner_(inner), node_of_(std::move(node_of)) {}
    int rank() const override { return inner_.rank(); }
    int size() const override { return inner_.size(); }
    void barrier() override { inner_.barrier(); }
    void broadcast(void* data, std::size_t bytes, int root) override { inner_.broadcast(data, bytes, root); }
    std::int64_t max(std::int64_t value) override { return inner_.max(value); }
    double max(double value) override { return inner_.max(value); }
    double sum(double value) override { return inner_.sum(value); }
    std::vector<double> all_gather(const std::vector<double>& values) override { return inner_.all_gather(values); }
    void send(const void* data, std::size_t bytes, int destination, int tag) override {
        inner_.send(data, bytes, destination, tag);
    }
    void recv(void* data, std::size_t bytes, int source, int tag) override { inner_.recv(data, bytes, source, tag); }
    [[noreturn]] void abort(int code) override {
        inner_.abort(code);
        std::abort();  // not reached; virtual calls do not carry [[noreturn]]
    }
    int node_count() const override { return *std::max_element(node_of_.begin(), node_of_.end()) + 1; }
    int node_index() const override { return node_of_[static_cast<std::size_t>(rank())]; }
    int ranks_on_node() const override {
        return static_cast<int>(std::count(node_of_.begin(), node_of_.end(), node_index()));
    }

private:
    Comm& inner_;
    std::vector<int> node_of_;
};

TEST(NodeShares, EachNodeHasItsOwnRanksAndTheMemoryItsFirstRankSees) {
    const std::vector<int> node_of = {0, 1, 0, 0};  // ranks 0, 2, 3 on node 0; rank 1 on node 1
    std::vector<std::vector<NodeShare>> seen(node_of.size());
    testing::run_ranks(static_cast<int>(node_of.size()), [&](Comm& thread_comm) {
        NodesComm comm(thread_comm, node_of);
        NodeResources mine;
        mine.memory = (std::uint64_t{1} + static_cast<std::uint64_t>(comm.rank())) << 30;  // rank r sees r+1 GiB
        mine.memory_source = comm.rank() == 1 ? MemorySource::cgroup : MemorySource::meminfo;
        mine.cores = 2;
        seen[static_cast<std::size_t>(comm.rank())] = node_shares(comm, mine);
    });
    const std::vector<NodeShare>& nodes = seen[0];
    ASSERT_EQ(nodes.size(), 2u);
    EXPECT_EQ(nodes[0].ranks, 3);
    EXPECT_EQ(nodes[0].first_rank, 0);
    EXPECT_EQ(nodes[0].memory, std::uint64_t{1} << 30);
    EXPECT_EQ(nodes[0].memory_source, MemorySource::meminfo);
    EXPECT_EQ(nodes[1].ranks, 1);
    EXPECT_EQ(nodes[1].first_rank, 1);
    EXPECT_EQ(nodes[1].memory, std::uint64_t{2} << 30);
    EXPECT_EQ(nodes[1].memory_source, MemorySource::cgroup);
    EXPECT_EQ(nodes[1].cores, 2);
    EXPECT_FALSE(nodes[0].name.empty());  // the host name of its first rank
    for (const std::vector<NodeShare>& other : seen) {
        ASSERT_EQ(other.size(), nodes.size());
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            EXPECT_EQ(other[i].ranks, nodes[i].ranks);
            EXPECT_EQ(other[i].memory, nodes[i].memory);
            EXPECT_EQ(other[i].name, nodes[i].name);
        }
    }
}

}  // namespace
}  // namespace attnbatch::distributed
