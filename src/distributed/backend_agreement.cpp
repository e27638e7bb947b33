#include "attnbatch/distributed/backend_agreement.hpp"

#include <vector>

#include "attnbatch/error.hpp"

namespace attnbatch::distributed {

namespace k = attnbatch::kernels;

// Every rank makes the same collectives whatever its own options say (one per backend of the
// table, then three), so that ranks started with other options cannot deadlock here.
std::string agree_on_backend(Comm& comm, k::KernelOptions& kernel, const RankBackends& here) {
    const std::vector<k::Isa> table = k::built_isas();  // the same table, in the same order, on every rank
    std::vector<bool> on_every_rank;
    for (k::Isa isa : table) on_every_rank.push_back(comm.max(std::int64_t{here.runs(isa) ? 0 : 1}) == 0);
    const bool choosing = kernel.kind == k::KernelKind::blocked && kernel.isa == k::Isa::best;
    k::Isa own = k::Isa::best, agreed = k::Isa::best;
    for (std::size_t i = 0; i < table.size(); ++i) {
        if (k::isa_precision(table[i]) != kernel.precision) continue;
        if (own == k::Isa::best && here.runs(table[i])) own = table[i];
        if (agreed == k::Isa::best && on_every_rank[i]) agreed = table[i];
    }
    const bool differs = comm.max(std::int64_t{choosing && own != agreed ? 1 : 0}) > 0;
    const bool tiles_here = kernel.kind == k::KernelKind::blocked && kernel.precision == k::Precision::bf16 &&
                            kernel.amx_permitted && here.amx_tiles;
    const bool tiles_everywhere = comm.max(std::int64_t{tiles_here ? 0 : 1}) == 0;
    const bool tiles_somewhere = comm.max(std::int64_t{tiles_here ? 1 : 0}) > 0;

    std::string warning;
    if (choosing) {
        if (agreed == k::Isa::best) {
            throw Error(exit_usage, std::string("--precision ") + k::precision_name(kernel.precision) +
                                        ": not every rank's CPU has a backend that computes in it (bf16 needs AMX-BF16 or "
                                        "AVX512-BF16 on every node); hint: --precision fp32, or run on such nodes only");
        }
        kernel.isa = agreed;
        if (differs) {
            warning = std::string("the ranks' CPUs differ: every rank computes on ") + k::isa_name(agreed) +
                      ", the widest backend all of them run, so that a sequence's results are the same bits whichever "
                      "rank computes it; hint: run on nodes of one kind for the fastest backend";
        }
    }
    // On every bf16 rank alike, so that rank 0 warns though its own tiles were the ones refused.
    if (kernel.kind == k::KernelKind::blocked && kernel.precision == k::Precision::bf16) {
        if (!tiles_everywhere && tiles_somewhere) {
            warning += std::string(warning.empty() ? "" : "; ") +
                       "not every rank has AMX tiles (or Linux's grant of them): bf16 runs on AVX512-BF16 on every rank, "
                       "so that a sequence's results are the same bits whichever rank computes it";
        }
        kernel.amx_permitted = kernel.amx_permitted && tiles_everywhere;
    }
    return warning;
}

std::string agree_on_backend(Comm& comm, k::KernelOptions& kernel) {
    RankBackends here;
    here.runs = [](k::Isa isa) { return k::isa_available(isa); };
    if (kernel.precision == k::Precision::bf16 && k::isa_available(k::Isa::best, k::Precision::bf16)) {
        k::KernelOptions probe = kernel;
        probe.isa = k::resolve_isa(k::Isa::best, k::Precision::bf16);
        here.amx_tiles = k::matrix_unit(probe) == "amx-bf16";
    }
    return agree_on_backend(comm, kernel, here);
}

}  // namespace attnbatch::distributed
