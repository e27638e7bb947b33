#include "attnbatch/distributed/memory_model.hpp"

#include <algorithm>
#include <cstdio>

#include "attnbatch/error.hpp"
#include "attnbatch/kernels/projection.hpp"

namespace attnbatch::distributed {

namespace {
constexpr std::size_t kFloat = sizeof(float);
// The process itself: code, MPI and HDF5 libraries, HDF5's chunk cache, the output's staging
// buffer of whole chunks (4 MiB, the packed layout), the allocator's slack (one arena per
// thread: the main thread does I/O while the compute thread works).
constexpr std::size_t kProcessMargin = std::size_t{128} << 20;
}  // namespace

MemoryModel memory_model(const io::InputSpec& spec, const io::OutputLayout& layout,
                         const kernels::KernelOptions& kernel, int in_flight, bool rope) {
    const std::size_t len = spec.len, heads = spec.heads, dk = spec.d_k, dv = spec.d_v;
    const std::size_t kv_heads = static_cast<std::size_t>(spec.kv_head_count());
    const std::size_t qkv_width = heads * dk + kv_heads * (dk + dv);  // H query heads, G key and value heads
    const bool projected = spec.weights.has_value();
    MemoryModel m;
    std::size_t per = 0;
    if (spec.mode == io::InputMode::embeddings) per += len * spec.d;      // x as read
    else per += len * qkv_width;                                          // q, k, v as read
    if (projected) per += len * qkv_width;                                // projected q, k, v
    // Rotary embeddings of unprojected input: rotated copies of q and k.
    else if (rope) per += len * (heads + kv_heads) * dk;
    per += len * heads * dv;                                              // attention output
    if (spec.weights && spec.weights->has_w_o) per += len * static_cast<std::size_t>(spec.d_out());
    per += heads * len;                                                   // lse
    m.per_sequence = per * kFloat + sizeof(std::int32_t);
    if (layout.save_weights != io::SaveWeights::none) {
        m.per_weights_sequence = static_cast<std::size_t>(layout.weights_heads()) * len * len * layout.weights_element_bytes();
    }
    // The kernel's workspace for one sequence bounds it for any batch (it is per thread).
    kernels::AttentionParams probe;
    probe.batch = 1;
    probe.heads = static_cast<int>(heads);
    probe.kv_heads = static_cast<int>(kv_heads);
    probe.len_q = probe.len_k = static_cast<int>(len);
    probe.dim_k = static_cast<int>(dk);
    probe.dim_v = static_cast<int>(dv);
    probe.weights_mode = layout.save_weights == io::SaveWeights::none ? kernels::WeightsMode::none
                         : layout.save_weights == io::SaveWeights::mean ? kernels::WeightsMode::mean_over_heads
                                                                        : kernels::WeightsMode::all;
    std::size_t fixed = kernels::attention_workspace_bytes(probe, kernel);
    if (rope) fixed += 2 * len * (dk / 2) * kFloat;  // the cos and sin table
    if (spec.weights) {
        const int d = static_cast<int>(spec.weights->d_in);
        const int qk = static_cast<int>(spec.weights->qk_width), v = static_cast<int>(spec.weights->v_width);
        const int kw = static_cast<int>(spec.weights->key_width()), attended = static_cast<int>(heads * dv);
        std::size_t packed = kernels::projection_packed_floats(d, qk, kernel.isa) +
                             kernels::projection_packed_floats(d, kw, kernel.isa) +
                             kernels::projection_packed_floats(d, v, kernel.isa);
        if (spec.weights->has_w_o) packed += kernels::projection_packed_floats(attended, static_cast<int>(spec.d_out()), kernel.isa);
        fixed += packed * kFloat + kernels::projection_workspace_bytes(std::max(d, attended), kernel.isa, kernel.threads);
    }
    // Each block in flight has its own buffers, workspaces and packed weights.
    const std::size_t copies = static_cast<std::size_t>(std::max(1, in_flight));
    m.per_sequence *= copies;
    m.per_weights_sequence *= copies;
    m.fixed = fixed * copies + kProcessMargin;
    return m;
}

std::string format_bytes(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 5) {
        bytes /= 1024.0;
        ++u;
    }
    char text[32];
    std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
    return text;
}

RowMemory row_memory(const io::InputSpec& spec, const io::OutputLayout& layout, const MemoryModel& model,
                     std::size_t max_memory, int in_flight) {
    const std::size_t heads = spec.heads, dk = spec.d_k, dv = spec.d_v;
    const bool projected = spec.weights.has_value();
    const std::size_t copies = static_cast<std::size_t>(std::max(1, in_flight));
    std::size_t key = 0, query = 0;
    if (spec.mode == io::InputMode::embeddings) key += spec.d;  // x as read (queries among its rows)
    else {
        key += heads * (dk + dv);  // k, v as read
        query += heads * dk;       // q as read
    }
    if (projected) {
        key += heads * (dk + dv);
        query += heads * dk;
    }
    query += heads * dv + heads;  // attention output, lse
    if (spec.weights && spec.weights->has_w_o) query += static_cast<std::size_t>(spec.d_out());
    RowMemory rows;
    rows.key_row = key * kFloat * copies;
    rows.query_row = query * kFloat * copies;
    if (layout.save_weights != io::SaveWeights::none) {
        rows.weights_row = static_cast<std::size_t>(layout.weights_heads()) * static_cast<std::size_t>(spec.len) *
                           layout.weights_element_bytes() * copies;
        rows.weights_first = layout.weights_first;
        rows.weights_last = layout.weights_end();
    }
    rows.budget = max_memory > model.fixed ? max_memory - model.fixed : 0;
    return rows;
}

void check_sequences_fit(const std::vector<std::int32_t>& lengths, const MemoryModel& model, const RowMemory& rows,
                         std::size_t max_memory) {
    const auto longest = std::max_element(lengths.begin(), lengths.end());
    if (longest == lengths.end()) return;
    const auto sequence = static_cast<std::int64_t>(longest - lengths.begin());
    const std::uint64_t keys = static_cast<std::uint64_t>(*longest) * rows.key_row;
    const std::uint64_t needed = model.fixed + keys + rows.row_bytes(sequence);
    if (needed <= max_memory) return;
    throw Error(exit_usage, "--max-memory " + format_bytes(static_cast<double>(max_memory)) + " is below the " +
                                format_bytes(static_cast<double>(needed)) + " one sequence needs at least: sequence " +
                                std::to_string(sequence) + " (length " + std::to_string(*longest) + ") takes " +
                                format_bytes(static_cast<double>(keys)) + " for its keys and values beside the " +
                                format_bytes(static_cast<double>(model.fixed)) +
                                " any step needs; hint: raise --max-memory (a sequence of any length runs in row slabs "
                                "once its keys and values fit)");
}

std::int64_t sequences_per_step(const MemoryModel& model, std::size_t max_memory, std::int64_t n) {
    const std::size_t one = model.per_sequence + model.per_weights_sequence;
    if (model.fixed + one > max_memory) {
        throw Error(exit_usage,
                        "--max-memory " + format_bytes(static_cast<double>(max_memory)) + " is below the " +
                            format_bytes(static_cast<double>(model.fixed + one)) +
                            " one sequence needs; hint: raise --max-memory, or shrink the weights with "
                            "--save-weights mean|none, --weights-dtype f16 or --weights-seqs");
    }
    const auto fitting = static_cast<std::int64_t>((max_memory - model.fixed) / one);
    return std::max<std::int64_t>(std::min(fitting, n), 1);
}

}  // namespace attnbatch::distributed
