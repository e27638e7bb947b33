// What `attnbatch run` prints: the header, the plan, the summary and its PERFORMANCE line.
#include "run_printing.hpp"

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "amx_permission.hpp"
#include "attnbatch/distributed/stop_request.hpp"
#include "ranges.hpp"

namespace attnbatch::cli {

namespace {

namespace dist = attnbatch::distributed;

// "1 rank", "2 ranks".
template <class Count>
std::string counted(Count count, const char* noun) {
    return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

// Where a unit starts or ends: "s", or "s:r" for row r of sequence s (inside a split sequence).
// Where a unit starts and ends, in the input's numbering (`offset`: run --sequences): a
// sequence, or sequence:row inside a split one.
std::string start_of(const dist::Unit& unit, std::int64_t offset) {
    return unit.piece() && unit.row_first > 0 ? std::to_string(offset + unit.first) + ":" + std::to_string(unit.row_first)
                                              : std::to_string(offset + unit.first);
}
std::string end_of(const dist::Unit& unit, std::int64_t offset) {
    return unit.piece() && !unit.ends_sequence ? std::to_string(offset + unit.first) + ":" + std::to_string(unit.row_last)
                                               : std::to_string(offset + unit.last);
}

// "ob1 over tcp + vader (chosen by Open MPI; Open MPI v4.1.4)".
std::string describe(const dist::Messaging& m, int ranks) {
    if (ranks == 1) return "none (one process)";
    std::string text = m.layer.empty() ? "an unknown layer" : m.layer;
    for (std::size_t i = 0; i < m.transports.size(); ++i) text += (i == 0 ? " over " : " + ") + m.transports[i];
    return text + " (chosen by " + m.chosen_by + (m.library.empty() ? "" : "; " + m.library) + ")";
}

// The nodes the ranks run on and each node's memory budget: a quarter of the node's own memory
// (its cgroup limit where set), shared by its own ranks only. Every node for a few, the
// extremes otherwise.
void print_nodes(const dist::Job& job, const dist::Messaging& messaging) {
    const std::vector<dist::NodeShare>& nodes = job.nodes;
    if (nodes.empty()) return;
    const auto budget = [](const dist::NodeShare& n) {
        dist::NodeResources resources;
        resources.memory = n.memory;
        return static_cast<double>(dist::default_max_memory(resources, n.ranks));
    };
    const auto [fewest, most] = std::minmax_element(nodes.begin(), nodes.end(),
                                                    [](const auto& a, const auto& b) { return a.ranks < b.ranks; });
    std::cout << "  " << counted(nodes.size(), "node") << ", ranks per node " << fewest->ranks
              << (most->ranks != fewest->ranks ? "-" + std::to_string(most->ranks) : std::string()) << "; messaging "
              << describe(messaging, job.comm.size()) << '\n';
    if (nodes.size() <= static_cast<std::size_t>(dist::kNamedNodes)) {
        for (const dist::NodeShare& n : nodes) {
            std::cout << "    " << n.name << ": " << counted(n.ranks, "rank") << ", memory "
                      << dist::format_bytes(static_cast<double>(n.memory)) << " (" << dist::name_of(n.memory_source)
                      << "): budget " << dist::format_bytes(static_cast<double>(n.memory) / 4) << ", "
                      << dist::format_bytes(budget(n)) << " per rank\n";
        }
        return;
    }
    const auto [poorest, richest] = std::minmax_element(nodes.begin(), nodes.end(),
                                                        [&](const auto& a, const auto& b) { return budget(a) < budget(b); });
    std::cout << "    budget per rank from " << dist::format_bytes(budget(*poorest)) << " (node " << poorest - nodes.begin()
              << ", first rank " << poorest->first_rank << ") to " << dist::format_bytes(budget(*richest)) << " (node "
              << richest - nodes.begin() << ")\n";
}

}  // namespace

void print_header(const dist::Job& job, const dist::Messaging& messaging) {
    const dist::JobSettings& s = job.settings;
    const io::InputSpec& spec = job.spec;
    const int ranks = job.comm.size();
    std::cout << "attnbatch run: " << spec.path << " N=" << spec.n
              << (spec.n != job.stored_sequences ? " (sequences " + format_range(spec.first_sequence, spec.first_sequence + spec.n) +
                                                       " of " + std::to_string(job.stored_sequences) + ")"
                                                 : std::string())
              << " L=" << spec.len << " H=" << spec.heads;
    if (spec.kv_head_count() != spec.heads) std::cout << " G=" << spec.kv_head_count();
    std::cout << " d_k=" << spec.d_k << " d_v=" << spec.d_v << (s.attention.causal ? " causal" : "")
              << (s.attention.precision == kernels::Precision::bf16
                      ? " bf16 on " + kernels::matrix_unit(job.attention.kernel) + amx_refusal_note()
                      : std::string());
    if (s.attention.rotary()) std::cout << " rope_theta=" << s.attention.rope_theta;
    std::cout << " -> " << s.output << '\n';
    if (spec.weights && spec.weights->file_heads > 0 && s.input.heads == 0) {
        std::cout << "  heads from " << spec.weights->path << ": H=" << spec.heads
                  << (spec.weights->file_kv_heads > 0 ? " G=" + std::to_string(spec.kv_head_count()) : std::string()) << '\n';
    }
    if (spec.weights && spec.weights->file_rope_theta > 0 && !s.attention.rotary()) {
        std::cout << "  note: " << spec.weights->path << " records rope_theta = " << spec.weights->file_rope_theta
                  << " (its model's rotary embeddings), not applied; hint: --rope-theta " << spec.weights->file_rope_theta
                  << " applies them\n";
    }
    std::cout
              << "  output " << dist::format_bytes(static_cast<double>(job.sizes.output + job.sizes.lse + job.sizes.lengths))
              << ", weights " << dist::format_bytes(static_cast<double>(job.sizes.attention)) << " ("
              << io::name_of(job.layout.save_weights) << ", " << io::name_of(job.layout.weights_dtype) << ")"
              << (job.layout.gzip_level ? " before gzip" : "") << "; " << job.plan_ranks
              << (job.plan_ranks == 1 ? " rank" : " ranks") << (job.plan_ranks != ranks ? " (simulated)" : "") << " x "
              << counted(job.attention.kernel.threads, "thread") << ", io " << dist::name_of(job.io_mode)
              << (job.fsync ? ", fsync on" : ", fsync off (OUTPUT published without waiting for the disk)")
              << (!job.settings.fsync && job.resume.state == dist::ResumeState::partial && job.resume.recorded_fsync >= 0
                      ? ", as OUTPUT.partial recorded"
                      : "")
              << ", steps of at most "
              << counted(job.max_sequences, "sequence")
              << (job.max_step_bytes > 0 ? " and " + dist::format_bytes(static_cast<double>(job.max_step_bytes)) + " of data" : "")
              << " under --max-memory "
              << dist::format_bytes(static_cast<double>(s.max_memory)) << " per rank\n";
    print_nodes(job, messaging);
}

void print_plan(const dist::Job& job) {
    const dist::Plan& plan = job.predicted;
    const std::vector<dist::Unit>& units = job.units;
    const char* schedule = dist::name_of(job.settings.schedule);
    const char* strategy = job.settings.schedule == dist::ScheduleKind::dynamic ? "simulated-equal-speed" : "contiguous";
    const std::size_t ranks = plan.ranks.size();
    double total = 0, largest = 0, largest_unit = 0;
    std::int64_t idle = 0, pieces = 0, split = 0;
    for (const dist::RankShare& share : plan.ranks) {
        total += share.cost;
        largest = std::max(largest, share.cost);
        idle += share.units.empty() ? 1 : 0;
    }
    for (const dist::Unit& unit : units) {
        largest_unit = std::max(largest_unit, unit.cost);
        pieces += unit.piece() ? 1 : 0;
        split += unit.piece() && unit.row_first == 0 ? 1 : 0;
    }
    // The critical path is the costliest rank: no schedule of these units is shorter than
    // their largest, so its share of the path says how far splitting went.
    const double largest_share = largest > 0 ? largest_unit / largest : 0.0;
    std::cout << std::fixed << std::setprecision(3);
    std::cout << "  plan: " << counted(units.size(), "unit") << " on " << counted(ranks, "rank") << " (" << schedule << ", " << strategy
              << "), predicted imbalance " << plan.imbalance * 100 << "%";
    if (pieces > 0) std::cout << "; " << split << " long sequences split into " << pieces << " pieces of query rows";
    std::cout << '\n';
    std::cout << "    idle ranks: " << idle << " of " << ranks << " get no work; largest unit " << largest_unit * 1e-9
              << " GFLOP = " << largest_share * 100 << "% of the critical path (the costliest rank, " << largest * 1e-9
              << " GFLOP)\n";
    // Every rank for small runs; the extremes otherwise (a 4096-rank table helps no one).
    const std::size_t shown = ranks <= 16 ? ranks : 0;
    for (std::size_t r = 0; r < shown; ++r) {
        const dist::RankShare& share = plan.ranks[r];
        // Sequences as the input numbers them (they differ from the rows with --sequences).
        const std::int64_t offset = job.spec.first_sequence;
        const std::string first = share.units.empty() ? std::to_string(offset) : start_of(units[static_cast<std::size_t>(share.units.front())], offset);
        const std::string last = share.units.empty() ? std::to_string(offset) : end_of(units[static_cast<std::size_t>(share.units.back())], offset);
        std::cout << "    rank " << r << ": " << counted(share.units.size(), "unit") << ", sequences [" << first << ", " << last
                  << "), " << share.tokens << " tokens, predicted " << share.cost * 1e-9 << " GFLOP\n";
    }
    if (shown == 0 && ranks > 0) {
        auto [lo, hi] = std::minmax_element(plan.ranks.begin(), plan.ranks.end(),
                                            [](const dist::RankShare& a, const dist::RankShare& b) { return a.cost < b.cost; });
        std::cout << "    per rank: mean " << total / static_cast<double>(ranks) * 1e-9 << " GFLOP, min " << lo->cost * 1e-9
                  << " (rank " << (lo - plan.ranks.begin()) << "), max " << hi->cost * 1e-9 << " (rank "
                  << (hi - plan.ranks.begin()) << ")\n";
    }
    std::cout << "PLAN ranks=" << ranks << " units=" << units.size() << " schedule=" << schedule << " strategy=" << strategy
              << " imbalance_percent=" << plan.imbalance * 100 << " max_rank_gflop=" << largest * 1e-9
              << " mean_rank_gflop=" << (ranks ? total / static_cast<double>(ranks) * 1e-9 : 0.0) << " idle_ranks=" << idle
              << " largest_unit_percent=" << largest_share * 100 << " split_sequences=" << split << " pieces=" << pieces
              << '\n';
    std::cout.unsetf(std::ios::floatfield);
}

void print_summary(const dist::Job& job, const dist::JobResult& result) {
    const dist::RankTimes& sum = result.sum;
    const double total = result.wall_seconds;
    if (!result.rounds.collective_fallback.empty()) {
        std::cout << "  note: collective writes fell back to independent I/O (" << result.rounds.collective_fallback << ")\n";
    }
    std::cout << std::fixed << std::setprecision(3) << "  done: " << counted(result.rounds.rounds, "round") << ", "
              << counted(job.units.size(), "unit") << ", " << counted(sum.sequences, "sequence") << " in " << total << " s (summed over ranks: read " << sum.read
              << ", compute " << sum.compute << ", communicate " << sum.communicate << ", write " << sum.write
              << ", waiting for each other " << sum.wait << "; I/O hidden " << std::setprecision(1) << result.io_hidden * 100 << "%)\n"
              << std::setprecision(3) << "PERFORMANCE ranks=" << job.comm.size() << " threads=" << job.attention.kernel.threads
              << " sequences=" << sum.sequences << " tokens=" << sum.tokens << " seconds=" << total
              << " seqs_per_s=" << std::setprecision(1) << static_cast<double>(sum.sequences) / total
              << " compute_gflops=" << (result.slowest_compute > 0 ? result.flops() / result.slowest_compute * 1e-9 : 0.0)
              << " end_to_end_gflops=" << result.flops() / total * 1e-9 << std::setprecision(3)
              << " imbalance=" << result.imbalance << " predicted_imbalance=" << job.predicted.imbalance
              << " io_hidden=" << result.io_hidden << " io=" << dist::name_of(job.io_mode)
              << " schedule=" << dist::name_of(job.settings.schedule) << " fsync=" << (job.fsync ? "on" : "off") << '\n';
    std::cout.unsetf(std::ios::floatfield);
}

void note_late_stop() {
    const int signal = dist::stop_signal();
    if (signal == 0) return;
    std::cout << "  note: " << dist::signal_name(signal) << " arrived during " << dist::name_of(dist::stop_phase())
              << ", when nothing was left to interrupt\n";
}

}  // namespace attnbatch::cli
