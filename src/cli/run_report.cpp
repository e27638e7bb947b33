// `run --report FILE.json`: the run's figures, per rank, in JSON.
#include "run_report.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <type_traits>

#include "attnbatch/distributed/stop_request.hpp"
#include "attnbatch/error.hpp"
#include "attnbatch/io/output/attention_fields.hpp"
#include "json_writer.hpp"

namespace attnbatch::cli {

namespace dist = attnbatch::distributed;

// The --report file is written last: a directory that is missing or not writable is found
// before the run rather than after it (a dry run asks the same).
void check_report_path(const std::string& report) {
    if (report.empty()) return;
    const std::filesystem::path path(report);
    const std::filesystem::path directory = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    std::error_code error;
    if (std::filesystem::is_directory(path, error)) {
        throw Error(exit_usage, "--report " + report + " is a directory, expected a file path; hint: e.g. " + report + "/run.json");
    }
    if (!std::filesystem::is_directory(directory, error)) {
        throw Error(exit_io, "--report " + report + ": directory " + directory.string() +
                                 " does not exist; hint: create it or fix --report");
    }
    if (::access(directory.c_str(), W_OK | X_OK) != 0) {
        throw Error(exit_io, "--report " + report + ": directory " + directory.string() + " is not writable: " +
                                 std::strerror(errno) + "; hint: choose another --report");
    }
}

namespace {

// Where the wall time went outside the rounds, the slowest rank's each (phase_times.hpp).
void write_phases(JsonWriter& json, const dist::PhaseTimes& p, double mpi_init) {
    json.key("start_up_seconds").value(mpi_init + p.before_rounds())
        .key("shut_down_seconds").value(p.after_rounds())
        .key("phase_seconds").begin_object()
        .key("mpi_init").value(mpi_init)
        .key("describe").value(p.describe)
        .key("lengths").value(p.lengths)
        .key("plan").value(p.plan)
        .key("preflight").value(p.preflight)
        .key("value_scan").value(p.value_scan)
        .key("output_creation").value(p.output_creation)
        .key("first_read").value(p.first_read)
        .key("rounds").value(p.rounds)
        .key("last_write").value(p.last_write)
        .key("close").value(p.close)
        .key("publish").value(p.publish)
        .end_object();
}

// Where the ranks ran: nodes in node order (their names and memory when few enough to list),
// and what carried their messages.
void write_nodes(JsonWriter& json, const std::vector<dist::NodeShare>& nodes, const dist::Messaging& messaging) {
    json.key("nodes").value(nodes.size()).key("ranks_per_node").begin_array();
    for (const dist::NodeShare& node : nodes) json.value(node.ranks);
    json.end_array().key("node_memory_bytes").begin_array();
    for (const dist::NodeShare& node : nodes) json.value(node.memory);
    json.end_array().key("node_memory_source").begin_array();
    for (const dist::NodeShare& node : nodes) json.value(dist::name_of(node.memory_source));
    json.end_array().key("node_names").begin_array();
    for (const dist::NodeShare& node : nodes) json.value(node.name);
    json.end_array()
        .key("messaging").begin_object()
        .key("library").value(messaging.library)
        .key("layer").value(messaging.layer)
        .key("chosen_by").value(messaging.chosen_by)
        .key("transports").begin_array();
    for (const std::string& transport : messaging.transports) json.value(transport);
    json.end_array().end_object();
}

// The settings that change result bits, under the output's attribute names.
void write_attention(JsonWriter& json, const kernels::AttentionSpec& spec) {
    io::for_each_attention_field(spec, [&json](const io::AttentionField& field, const auto& value, const auto&) {
        json.key(field.attribute);
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, kernels::Precision>) {
            json.value(kernels::precision_name(value));
        } else {
            json.value(value);
        }
    });
}

}  // namespace

void write_report(const std::string& path, const dist::Job& job, const dist::JobResult& result, double mpi_init,
                  const dist::Messaging& messaging) {
    JsonWriter json;
    json.begin_object()
        .key("ranks").value(result.rounds.ranks.size())
        .key("threads").value(job.attention.kernel.threads);
    write_attention(json, job.attention.spec);
    // The backend the ranks agreed on (distributed/backend_agreement.hpp), as the header and the
    // resume identity name it.
    json.key("matrix_unit").value(kernels::matrix_unit(job.attention.kernel));
    json.key("io").value(dist::name_of(job.io_mode))
        .key("schedule").value(dist::name_of(job.settings.schedule))
        .key("fsync").value(job.fsync ? "on" : "off")
        .key("output").value(job.settings.output)
        .key("wall_seconds").value(result.wall_seconds)
        .key("units").value(job.units.size())
        .key("rounds").value(result.rounds.rounds)
        .key("max_sequences_per_step").value(job.max_sequences)
        .key("imbalance").value(result.imbalance)
        .key("predicted_imbalance").value(job.predicted.imbalance)
        .key("io_hidden_fraction").value(result.io_hidden)
        .key("collective_fallback").value(result.rounds.collective_fallback);
    write_phases(json, result.phases, mpi_init);
    write_nodes(json, job.nodes, messaging);
    json.key("per_rank").begin_array();
    for (std::size_t r = 0; r < result.rounds.ranks.size(); ++r) {
        const dist::RankTimes& t = result.rounds.ranks[r];
        const double flops = t.attention_flops + t.projection_flops;
        json.begin_object()
            .key("rank").value(r)
            .key("wall").value(t.wall)
            .key("read").value(t.read)
            .key("compute").value(t.compute)
            .key("compute_cpu").value(t.compute_cpu)
            .key("compute_system").value(t.compute_system)
            .key("communicate").value(t.communicate)
            .key("write").value(t.write)
            .key("idle").value(t.idle)
            .key("io_cpu").value(t.io_cpu)
            .key("wait").value(t.wait)
            .key("units").value(t.units)
            .key("steps").value(t.steps)
            .key("sequences").value(t.sequences)
            .key("tokens").value(t.tokens)
            .key("attention_gflop").value(t.attention_flops * 1e-9)
            .key("projection_gflop").value(t.projection_flops * 1e-9)
            .key("compute_gflops").value(t.compute > 0 ? flops / t.compute * 1e-9 : 0.0)
            .key("io_exposed").value(t.exposed)
            .key("io_hidden_fraction").value(t.hidden_fraction())
            .key("direct_write_bytes").value(static_cast<std::int64_t>(t.direct_bytes));
        if (t.row_block > 0) json.key("row_block").value(t.row_block);
        else json.key("row_block").null();
        json.end_object();
    }
    json.end_array();
    // When each phase of this process began, in seconds from the start of main(): where the
    // time before and after the rounds went (start-up, validation, resume verification...).
    const double started = dist::phase_entered_at(dist::Phase::start_up);
    json.key("started_at_unix_seconds").value(started).key("phase_starts").begin_object();
    for (int p = 0; p < dist::kPhaseCount; ++p) {
        const auto phase = static_cast<dist::Phase>(p);
        const double entered = dist::phase_entered_at(phase);
        if (entered > 0) json.key(dist::key_of(phase)).value(entered - started);
    }
    json.end_object().end_object();
    std::ofstream out(path);
    out << json.text() << '\n';
    if (!out) throw Error(exit_io, "--report: cannot write '" + path + "'");
}

}  // namespace attnbatch::cli
