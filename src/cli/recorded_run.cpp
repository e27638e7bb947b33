#include "recorded_run.hpp"

#include "attnbatch/io/schema_names.hpp"

#include <cmath>
#include <map>

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

RecordedRun read_recorded_run(const io::OutputReader& output, const std::string& input_path,
                              const std::string& weights_path) {
    const std::map<std::string, std::string> config = output.recorded_options();
    io::InputOptions in_opt;
    in_opt.input_path = input_path;
    const bool qkv = config.count("query") > 0;
    if (!qkv) in_opt.dataset = get(config, "dataset", io::dataset::embeddings);
    if (config.count("lengths")) in_opt.lengths = config.at("lengths");
    if (qkv) {
        in_opt.query = get(config, "query", "");
        in_opt.key = get(config, "key", "");
        in_opt.value = get(config, "value", "");
    }
    in_opt.weights_path = !weights_path.empty() ? weights_path : get(config, "weights", "");
    const std::string heads = get(config, "heads", "1");
    in_opt.heads = heads != "1" ? std::stoi(heads) : 0;
    in_opt.check_finite = false;  // the run checked it; recomputation only needs the numbers
    RecordedRun run;
    run.input = io::describe_input(in_opt);
    if (run.input.weights) run.projections = io::read_weights(*run.input.weights);
    run.causal = get(config, "causal", "false") == "true";
    run.scale = std::stod(get(config, "scale", "0"));
    if (run.scale <= 0) run.scale = 1.0 / std::sqrt(static_cast<double>(run.input.d_k));
    run.save_weights = get(config, "save-weights", "all");
    run.weights_f16 = get(config, "weights-dtype", "f32") == "f16";
    return run;
}

void load_sequence(const RecordedRun& run, io::InputReader& reader, std::int64_t sequence, SequenceInputs& out) {
    const io::InputSpec& in = run.input;
    const std::size_t len = in.len, heads = in.heads, dk = in.d_k, dv = in.d_v;
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
    if (proj) {
        const std::size_t rows = static_cast<std::size_t>(out.length);
        auto to_float = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
        out.q = to_float(project64(block.x.data(), len, rows, in.d, proj->w_q, proj->b_q, heads * dk));
        out.k = to_float(project64(block.x.data(), len, rows, in.d, proj->w_k, proj->b_k, heads * dk));
        out.v = to_float(project64(block.x.data(), len, rows, in.d, proj->w_v, proj->b_v, heads * dv));
    } else if (in.mode == io::InputMode::embeddings) {
        out.q = out.k = out.v = block.x;
    } else {
        out.q = block.q;
        out.k = block.k;
        out.v = block.v;
    }
    const bool split = in.mode == io::InputMode::qkv && in.layout == io::QkvLayout::split && !proj;
    auto strides = [&](std::size_t d) {
        return split ? kernels::TensorStrides{0, static_cast<std::ptrdiff_t>(len * d), static_cast<std::ptrdiff_t>(d)}
                     : kernels::TensorStrides{0, static_cast<std::ptrdiff_t>(d), static_cast<std::ptrdiff_t>(heads * d)};
    };
    kernels::AttentionParams& p = out.params;
    p = kernels::AttentionParams{};
    p.q = out.q.data();
    p.k = out.k.data();
    p.v = out.v.data();
    p.q_strides = p.k_strides = strides(dk);
    p.v_strides = strides(dv);
    p.batch = 1;
    p.heads = static_cast<int>(heads);
    p.len_q = p.len_k = static_cast<int>(len);
    p.dim_k = static_cast<int>(dk);
    p.dim_v = static_cast<int>(dv);
    p.scale = static_cast<float>(run.scale);
    p.causal = run.causal;
    p.lengths = &out.length;
}

}  // namespace attnbatch::cli
