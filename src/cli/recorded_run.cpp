#include "recorded_run.hpp"

#include "attnbatch/io/input/npy_shards.hpp"

#include "attnbatch/io/output/journal.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "attnbatch/kernels/rope.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>

namespace attnbatch::cli {

namespace {

std::string get(const std::map<std::string, std::string>& config, const std::string& key, const std::string& fallback) {
    const auto it = config.find(key);
    return it == config.end() ? fallback : it->second;
}

}  // namespace

std::vector<double> project64(const float* x, std::size_t len, std::size_t rows, std::size_t in,
                              const std::vector<float>& w, const std::vector<float>& b, std::size_t out) {
    std::vector<double> y(len * out, 0.0);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < out; ++c) {
            double s = b.empty() ? 0.0 : b[c];
            for (std::size_t i = 0; i < in; ++i) s += static_cast<double>(x[r * in + i]) * w[i * out + c];
            y[r * out + c] = s;
        }
    return y;
}

std::string RecordedRun::identity_field(const std::string& key) const { return get(identity, key, ""); }

std::string find_recorded_file(const io::OutputReader& output, const std::map<std::string, std::string>& identity,
                               const std::string& role) {
    const bool input = role == "input";
    const io::Provenance provenance = output.provenance();
    const std::string as_given = input ? provenance.input_file : provenance.weights_file.empty()
                                                                     ? get(output.recorded_options(), "weights", "")
                                                                     : provenance.weights_file;
    std::vector<std::string> candidates{input ? provenance.input_file_absolute : provenance.weights_file_absolute};
    // Outputs of earlier versions record the real path only in their journal's identity.
    candidates.push_back(get(identity, input ? "input" : "weights", ""));
    if (!as_given.empty()) {
        candidates.push_back(as_given);
        if (as_given.front() != '/') {
            const std::filesystem::path beside = std::filesystem::path(output.path()).parent_path() / as_given;
            candidates.push_back(beside.lexically_normal().string());
        }
    }
    std::vector<std::string> tried;
    for (const std::string& path : candidates) {
        if (path.empty() || path == "(none)" || std::find(tried.begin(), tried.end(), path) != tried.end()) continue;
        std::error_code error;
        if (std::filesystem::is_regular_file(path, error)) return path;
        // .npy shards: a glob, a directory or a list file, resolved again by describe_input.
        if (input && io::is_npy_input(path) && (path.find_first_of("*?[") != std::string::npos ||
                                                std::filesystem::exists(path, error))) {
            return path;
        }
        tried.push_back(path);
    }
    if (tried.empty()) return {};
    std::string list;
    for (std::size_t i = 0; i < tried.size(); ++i) list += (i ? (i + 1 == tried.size() ? " and " : ", ") : "") + tried[i];
    throw Error(exit_io, output.path() + ": the run's " + (input ? "input" : "projection weights") + " file, recorded as '" +
                             as_given + "', is not at " + list + "; hint: give --" + role + " PATH");
}

RecordedRun read_recorded_run(const io::OutputReader& output, const std::string& input_path,
                              const std::string& weights_path) {
    const std::map<std::string, std::string> config = output.recorded_options();
    const bool maps = output.layout().save_weights != io::SaveWeights::none;
    const std::vector<std::string> problems =
        io::recorded_options_problems(config, maps ? std::optional(output.layout().weights_dtype) : std::nullopt);
    if (!problems.empty()) {
        throw Error(exit_invalid_input, output.path() + ": " + problems.front());
    }
    RecordedRun run;
    if (const std::optional<std::string> identity = io::read_output_identity(output.path())) {
        run.identity = io::identity_fields(*identity);
    }
    io::InputOptions in_opt;
    in_opt.input_path = !input_path.empty() ? input_path : find_recorded_file(output, run.identity, "input");
    if (in_opt.input_path.empty()) {
        throw Error(exit_usage, output.path() + " records no input file; hint: give --input");
    }
    const bool qkv = config.count("query") > 0;
    if (!qkv) in_opt.dataset = get(config, "dataset", io::dataset::embeddings);
    if (config.count("lengths")) in_opt.lengths = config.at("lengths");
    if (qkv) {
        in_opt.query = get(config, "query", "");
        in_opt.key = get(config, "key", "");
        in_opt.value = get(config, "value", "");
    }
    in_opt.weights_path = !weights_path.empty() ? weights_path
                          : config.count("weights") ? find_recorded_file(output, run.identity, "weights")
                                                     : std::string();
    const std::string heads = get(config, "heads", "1");
    in_opt.heads = heads != "1" ? std::stoi(heads) : 0;
    if (config.count("kv-heads")) in_opt.kv_heads = std::stoi(config.at("kv-heads"));
    in_opt.check_finite = false;  // the run checked it; recomputation only needs the numbers
    run.input = io::describe_input(in_opt);
    // The output's rows are the input sequences [first_sequence, first_sequence + N).
    const std::int64_t first = output.layout().first_sequence, rows = output.layout().n;
    const bool selected = first != 0 || config.count("sequences") > 0;  // run --sequences
    if (first < 0 || rows < 1 || first + rows > run.input.n || (!selected && rows != run.input.n)) {
        throw Error(exit_invalid_input, output.path() + " holds the sequences [" + std::to_string(first) + ", " +
                                            std::to_string(first + rows) + ") of its input, but " + in_opt.input_path +
                                            " has N = " + std::to_string(run.input.n) + "; hint: check --input");
    }
    if (selected && rows != run.input.n) io::select_sequences(run.input, first, first + rows);
    if (run.input.weights) run.projections = io::read_weights(*run.input.weights);
    run.attention = output.provenance().attention.resolved(run.input.d_k);  // outputs without the attribute scale: 1/sqrt(d_k)
    run.save_weights = get(config, "save-weights", "all");
    run.maps_f16 = get(config, "weights-dtype", "f32") == "f16";
    return run;
}

// Rotary embeddings of the first `rows` rows of a (L, heads*d) matrix, in double.
void rotate64(std::vector<double>& m, std::size_t rows, std::size_t heads, std::size_t d, double theta) {
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t h = 0; h < heads; ++h)
            kernels::apply_rope_f64(theta, static_cast<int>(d), static_cast<std::int64_t>(r), m.data() + (r * heads + h) * d);
}

void load_sequence(const RecordedRun& run, io::InputReader& reader, std::int64_t sequence, SequenceInputs& out) {
    const io::InputSpec& in = run.input;
    const std::size_t len = in.len, heads = in.heads, dk = in.d_k, dv = in.d_v;
    const std::size_t kv_heads = static_cast<std::size_t>(in.kv_head_count());
    const bool rope = run.attention.rotary();
    io::InputBlock block;
    reader.read(sequence, sequence + 1, block);
    out.length = block.lengths[0];
    if (in.packed) {  // its rows, padded to L as the recomputation expects
        if (in.mode == io::InputMode::embeddings) {
            block.x.resize(len * static_cast<std::size_t>(in.d), 0.0f);
        } else {
            block.q.resize(len * heads * dk, 0.0f);
            block.k.resize(len * heads * dk, 0.0f);
            block.v.resize(len * heads * dv, 0.0f);
        }
    }
    out.x = block.x;
    const auto& proj = run.projections;
    const std::size_t rows = static_cast<std::size_t>(out.length);
    auto to_float = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
    const bool split = in.mode == io::InputMode::qkv && in.layout == io::QkvLayout::split && !proj;
    if (proj) {
        std::vector<double> q = project64(block.x.data(), len, rows, in.d, proj->w_q, proj->b_q, heads * dk);
        std::vector<double> k = project64(block.x.data(), len, rows, in.d, proj->w_k, proj->b_k, kv_heads * dk);
        if (rope) {
            rotate64(q, rows, heads, dk, run.attention.rope_theta);
            rotate64(k, rows, kv_heads, dk, run.attention.rope_theta);
        }
        out.q = to_float(q);
        out.k = to_float(k);
        out.v = to_float(project64(block.x.data(), len, rows, in.d, proj->w_v, proj->b_v, kv_heads * dv));
    } else if (in.mode == io::InputMode::embeddings) {
        out.q = out.k = out.v = block.x;
    } else {
        out.q = block.q;
        out.k = block.k;
        out.v = block.v;
    }
    if (rope && !proj) {
        // Rows as (L, heads*d): a split [H, L, d] input is transposed first.
        const auto rotated = [&](const std::vector<float>& m, std::size_t count_heads) {
            std::vector<double> rowwise(len * count_heads * dk);
            for (std::size_t h = 0; h < count_heads; ++h)
                for (std::size_t r = 0; r < len; ++r)
                    for (std::size_t c = 0; c < dk; ++c)
                        rowwise[(r * count_heads + h) * dk + c] =
                            split ? m[(h * len + r) * dk + c] : m[r * (in.mode == io::InputMode::embeddings ? in.d : count_heads * dk) + h * dk + c];
            rotate64(rowwise, rows, count_heads, dk, run.attention.rope_theta);
            return to_float(rowwise);
        };
        std::vector<float> q = rotated(out.q, heads), k = rotated(out.k, kv_heads);
        out.q = std::move(q);
        out.k = std::move(k);
    }
    // Rows hold heads side by side ([L, heads*d], or [L, d] of embeddings), or [heads, L, d] split.
    const bool rotated_rows = rope && !proj;
    auto strides = [&](std::size_t d, std::size_t count_heads, bool is_qk) {
        if (split && !(rotated_rows && is_qk))
            return kernels::TensorStrides{0, static_cast<std::ptrdiff_t>(len * d), static_cast<std::ptrdiff_t>(d)};
        return kernels::TensorStrides{0, static_cast<std::ptrdiff_t>(d), static_cast<std::ptrdiff_t>(count_heads * d)};
    };
    kernels::AttentionParams& p = out.params;
    p = kernels::AttentionParams{};
    p.q = out.q.data();
    p.k = out.k.data();
    p.v = out.v.data();
    p.q_strides = strides(dk, heads, true);
    p.k_strides = strides(dk, kv_heads, true);
    p.v_strides = strides(dv, kv_heads, false);
    p.batch = 1;
    p.heads = static_cast<int>(heads);
    p.kv_heads = static_cast<int>(kv_heads);
    p.len_q = p.len_k = static_cast<int>(len);
    p.dim_k = static_cast<int>(dk);
    p.dim_v = static_cast<int>(dv);
    run.attention.apply_to(p);
    p.lengths = &out.length;
}

}  // namespace attnbatch::cli
