// Ranks on different CPUs compute on one backend (backend_agreement.hpp): the first of the table
// that every rank runs, so that a sequence's results are the same bits whichever rank computes
// it. Each thread-rank here pretends to be another CPU through RankBackends.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "attnbatch/distributed/backend_agreement.hpp"
#include "attnbatch/error.hpp"
#include "support/thread_comm.hpp"

namespace attnbatch {
namespace {

using distributed::Comm;
using distributed::RankBackends;
using testing::run_ranks;
namespace k = kernels;

// The fp32 backends of this build, widest first, and the bf16 ones.
std::vector<k::Isa> backends_of(k::Precision precision) {
    std::vector<k::Isa> found;
    for (k::Isa isa : k::built_isas()) {
        if (k::isa_precision(isa) == precision) found.push_back(isa);
    }
    return found;
}

// A CPU that runs the backends from `first` on (the table is widest first).
RankBackends cpu_from(const std::vector<k::Isa>& table, std::size_t first, bool amx = false) {
    RankBackends cpu;
    cpu.runs = [table, first](k::Isa isa) {
        for (std::size_t i = first; i < table.size(); ++i) {
            if (table[i] == isa) return true;
        }
        return false;
    };
    cpu.amx_tiles = amx;
    return cpu;
}

struct Outcome {
    std::vector<k::Isa> isa;
    std::vector<bool> amx;
    std::vector<std::string> warning;
};

Outcome agree(const std::vector<RankBackends>& cpus, k::Precision precision, bool amx_permitted = false) {
    Outcome o;
    o.isa.resize(cpus.size());
    o.amx.resize(cpus.size());
    o.warning.resize(cpus.size());
    std::mutex guard;
    run_ranks(static_cast<int>(cpus.size()), [&](Comm& comm) {
        k::KernelOptions kernel;
        kernel.kind = k::KernelKind::blocked;
        kernel.precision = precision;
        kernel.amx_permitted = amx_permitted;
        const std::string warning = distributed::agree_on_backend(comm, kernel, cpus[static_cast<std::size_t>(comm.rank())]);
        std::lock_guard<std::mutex> lock(guard);
        o.isa[static_cast<std::size_t>(comm.rank())] = kernel.isa;
        o.amx[static_cast<std::size_t>(comm.rank())] = kernel.amx_permitted;
        o.warning[static_cast<std::size_t>(comm.rank())] = warning;
    });
    return o;
}

TEST(BackendAgreement, AlikeCpusKeepTheirWidestBackendWithoutAWord) {
    const std::vector<k::Isa> table = backends_of(k::Precision::fp32);
    const Outcome o = agree({cpu_from(table, 0), cpu_from(table, 0), cpu_from(table, 0)}, k::Precision::fp32);
    for (std::size_t r = 0; r < 3; ++r) {
        EXPECT_EQ(o.isa[r], table.front()) << "rank " << r;
        EXPECT_EQ(o.warning[r], "") << "rank " << r;
    }
}

TEST(BackendAgreement, MixedCpusTakeTheWidestBackendAllRun) {
    const std::vector<k::Isa> table = backends_of(k::Precision::fp32);
    if (table.size() < 2) GTEST_SKIP() << "this build has one fp32 backend only (not x86): nothing to choose between";
    // Rank 1 lacks the widest backend (an AVX2 node beside AVX-512 ones); rank 0 says so.
    const Outcome o = agree({cpu_from(table, 0), cpu_from(table, 1), cpu_from(table, 0)}, k::Precision::fp32);
    for (std::size_t r = 0; r < 3; ++r) {
        EXPECT_EQ(o.isa[r], table[1]) << "rank " << r << " computes on " << k::isa_name(o.isa[r]);
        EXPECT_NE(o.warning[r].find("the ranks' CPUs differ"), std::string::npos) << o.warning[r];
        EXPECT_NE(o.warning[r].find(k::isa_name(table[1])), std::string::npos) << o.warning[r];
    }
    // The weaker rank being rank 0 changes nothing.
    const Outcome first = agree({cpu_from(table, table.size() - 1), cpu_from(table, 0)}, k::Precision::fp32);
    EXPECT_EQ(first.isa[0], table.back());
    EXPECT_EQ(first.isa[1], table.back());
    EXPECT_NE(first.warning[1].find("the ranks' CPUs differ"), std::string::npos);
}

TEST(BackendAgreement, AnExplicitIsaIsLeftAlone) {
    const std::vector<k::Isa> table = backends_of(k::Precision::fp32);
    run_ranks(2, [&](Comm& comm) {
        k::KernelOptions kernel;
        kernel.kind = k::KernelKind::blocked;
        kernel.isa = table.back();
        const RankBackends cpu = cpu_from(table, comm.rank() == 0 ? 0 : table.size() - 1);
        EXPECT_EQ(distributed::agree_on_backend(comm, kernel, cpu), "");
        EXPECT_EQ(kernel.isa, table.back());
    });
}

TEST(BackendAgreement, Bf16KeepsAmxTilesOnlyWhereEveryRankHasThem) {
    const std::vector<k::Isa> table = backends_of(k::Precision::bf16);
    if (table.empty()) GTEST_SKIP() << "this build has no bf16 backend (not x86)";
    const Outcome all = agree({cpu_from(table, 0, true), cpu_from(table, 0, true)}, k::Precision::bf16, true);
    EXPECT_TRUE(all.amx[0] && all.amx[1]);
    EXPECT_EQ(all.warning[0], "");
    const Outcome mixed = agree({cpu_from(table, 0, true), cpu_from(table, 0, false)}, k::Precision::bf16, true);
    EXPECT_FALSE(mixed.amx[0] || mixed.amx[1]);
    EXPECT_NE(mixed.warning[0].find("not every rank has AMX tiles"), std::string::npos) << mixed.warning[0];
    // No bf16 backend on one rank: every rank refuses, with the same exit code.
    std::atomic<int> refusals{0};
    run_ranks(2, [&](Comm& comm) {
        k::KernelOptions kernel;
        kernel.kind = k::KernelKind::blocked;
        kernel.precision = k::Precision::bf16;
        const RankBackends cpu = cpu_from(table, comm.rank() == 0 ? 0 : table.size());
        try {
            distributed::agree_on_backend(comm, kernel, cpu);
        } catch (const Error& e) {
            if (e.exit_code() == exit_usage && std::string(e.what()).find("bf16") != std::string::npos) ++refusals;
        }
    });
    EXPECT_EQ(refusals.load(), 2);
}

}  // namespace
}  // namespace attnbatch
