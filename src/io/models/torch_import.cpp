// import-weights: find the layer, check its tensors against the head counts, transpose and
// write. The model's tensors are read one at a time.
#include "attnbatch/io/models/torch_import.hpp"

#include "attnbatch/error.hpp"
#include "attnbatch/io/h5/dims.hpp"
#include "attnbatch/io/h5/error.hpp"
#include "attnbatch/io/h5/file.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "attnbatch/io/models/weights_writer.hpp"
#include "attnbatch/io/output/output_paths.hpp"
#include "attnbatch/io/output/staged_file.hpp"
#include "attnbatch/io/h5/file_paths.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

namespace attnbatch::io {
namespace {

[[noreturn]] void usage(const std::string& message) { throw Error(exit_usage, message); }
[[noreturn]] void invalid(const std::string& message) { throw Error(exit_invalid_input, message); }

bool ends_with(const std::string& text, const std::string& suffix) {
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string joined(const std::string& prefix, const std::string& name) { return prefix.empty() ? name : prefix + "." + name; }

std::string list_text(const std::vector<std::string>& items, std::size_t most = 12) {
    std::string text;
    for (std::size_t i = 0; i < items.size() && i < most; ++i) text += (i ? ", " : "") + items[i];
    if (items.size() > most) text += ", ... (" + std::to_string(items.size()) + " in all)";
    return text.empty() ? "(none)" : text;
}

std::string divisors_of(std::int64_t value) {
    std::string text;
    int listed = 0;
    for (std::int64_t h = 1; h <= value && listed < 10; ++h) {
        if (value % h != 0) continue;
        text += (listed++ ? " " : "") + std::to_string(h);
    }
    return text;
}

// What the tensor names say of the layers: a suffix that only a scheme's tensors have.
struct Marker {
    const char* suffix;
    const char* naming;
};
constexpr Marker kMarkers[] = {
    {"in_proj_weight", "nn.MultiheadAttention"},
    {"q_proj_weight", "nn.MultiheadAttention"},
    {"self.query.weight", "bert"},
    {"query.weight", "bert"},
    {"q_proj.weight", "llama"},
};

// The model's config.json (Hugging Face: beside the weights), when there is one.
struct ModelConfig {
    std::string path;
    std::int64_t heads = 0, kv_heads = 0;
    double rope_theta = 0;
    std::string model_type;
    bool rope_scaling = false;
};

ModelConfig read_config(const std::string& model_path) {
    ModelConfig config;
    const std::string path = directory_of(model_path) + "/config.json";
    std::ifstream in(path);
    if (!in) return config;
    config.path = path;
    nlohmann::json json;
    try {
        json = nlohmann::json::parse(in);
    } catch (const nlohmann::json::parse_error& error) {
        invalid(path + ": not JSON (" + std::string(error.what()) + "); hint: it is read for head counts and rope_theta; "
                "move it away or fix it");
    }
    if (!json.is_object()) invalid(path + ": expected a JSON object (a Hugging Face model configuration)");
    const auto integer = [&](const char* key) -> std::int64_t {
        const auto it = json.find(key);
        return it != json.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
    };
    config.heads = integer("num_attention_heads");
    if (config.heads == 0) config.heads = integer("n_head");
    config.kv_heads = integer("num_key_value_heads");
    // 0 stands for "not given" below, so a stated count must be at least 1.
    for (const char* key : {"num_attention_heads", "n_head", "num_key_value_heads"}) {
        const auto it = json.find(key);
        if (it == json.end() || it->is_null()) continue;
        if (!it->is_number_integer() || it->get<std::int64_t>() < 1 || it->get<std::int64_t>() > std::numeric_limits<int>::max()) {
            invalid(path + ": " + key + " = " + it->dump() + ", expected a positive whole number of heads");
        }
    }
    if (const auto it = json.find("rope_theta"); it != json.end() && it->is_number()) config.rope_theta = it->get<double>();
    if (const auto it = json.find("model_type"); it != json.end() && it->is_string()) config.model_type = it->get<std::string>();
    if (const auto it = json.find("rope_scaling"); it != json.end() && !it->is_null()) config.rope_scaling = true;
    // Llama-like models with no rope_theta in their config use the Hugging Face default.
    if (config.rope_theta == 0 && json.contains("num_key_value_heads") && json.contains("max_position_embeddings")) {
        config.rope_theta = 10000.0;
    }
    return config;
}

// A count from the option, else the config; both and different: exit 2 naming both.
std::int64_t head_count(int option, std::int64_t configured, const char* option_name, const char* key,
                        const ModelConfig& config) {
    if (option != 0 && configured != 0 && option != configured) {
        usage(std::string(option_name) + " " + std::to_string(option) + " contradicts " + config.path + ", whose " + key +
              " = " + std::to_string(configured) + "; hint: omit " + option_name + " to use the model's configuration");
    }
    return option != 0 ? option : configured;
}

// One matrix or bias of the layer as read: its name, shape and values.
struct Tensor {
    std::string name;
    std::vector<std::int64_t> shape;
    std::vector<float> values;
    std::string dtype;
};

class Layer {
public:
    Layer(const SafetensorsFile& model, AttentionLayer layer) : model_(model), layer_(std::move(layer)) {}

    std::optional<Tensor> optional(const std::string& name) const {
        const SafetensorsTensor* tensor = model_.find(joined(layer_.prefix, name));
        if (!tensor) return std::nullopt;
        return Tensor{tensor->name, tensor->shape, model_.read_floats(*tensor), tensor->dtype};
    }

    Tensor required(const std::string& name) const {
        std::optional<Tensor> tensor = optional(name);
        if (tensor) return std::move(*tensor);
        std::vector<std::string> found;
        const std::string start = layer_.prefix.empty() ? std::string() : layer_.prefix + ".";
        for (const SafetensorsTensor& t : model_.tensors()) {
            if (t.name.compare(0, start.size(), start) == 0) found.push_back(t.name);
        }
        invalid(model_.path() + ": the " + layer_.naming + " layer " + (layer_.prefix.empty() ? "at the top" : layer_.prefix) +
                " has no tensor " + joined(layer_.prefix, name) + "; found: " + list_text(found) +
                "; hint: --prefix picks another layer");
    }

    const AttentionLayer& layer() const { return layer_; }
    const std::string& path() const { return model_.path(); }

private:
    const SafetensorsFile& model_;
    AttentionLayer layer_;
};

// PyTorch's [out, in] rows [first, first + rows) as the row-vector layout [in, rows].
std::vector<float> transposed(const Tensor& t, std::int64_t first, std::int64_t rows) {
    const std::int64_t in = t.shape[1];
    std::vector<float> out(static_cast<std::size_t>(in * rows));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < in; ++c) out[static_cast<std::size_t>(c * rows + r)] = t.values[static_cast<std::size_t>((first + r) * in + c)];
    return out;
}

std::vector<float> slice(const Tensor& t, std::int64_t first, std::int64_t count) {
    return std::vector<float>(t.values.begin() + first, t.values.begin() + first + count);
}

void expect_rank(const Tensor& t, std::size_t rank, const std::string& path, const std::string& expected) {
    if (t.shape.size() == rank) return;
    invalid(path + ": tensor " + t.name + " has shape " + shape_text(t.shape) + ", expected " + expected);
}

// Every later step divides by these extents (features per head, heads per group); a matrix
// with no rows or columns has no head, so it is refused by name here.
void expect_matrix(const Tensor& t, const std::string& path, const std::string& expected) {
    expect_rank(t, 2, path, expected);
    if (t.shape[0] > 0 && t.shape[1] > 0) return;
    invalid(path + ": tensor " + t.name + " has shape " + shape_text(t.shape) + ", expected " + expected +
            " with at least one row and one column");
}

// The layer's matrices in the row-vector layout, before any head count is applied.
struct Projections {
    std::vector<float> w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o;
    std::int64_t d = 0, q_width = 0, k_width = 0, v_width = 0, d_out = 0;
    std::vector<std::pair<std::string, std::string>> sources;  // (dataset, tensor)
    std::set<std::string> dtypes;
};

// A Linear-like [out, in] weight and its optional [out] bias.
void take_linear(Projections& p, const Tensor& weight, const std::optional<Tensor>& bias, const std::string& path,
                 const char* w_name, const char* b_name, std::vector<float>& w, std::vector<float>& b, std::int64_t& width) {
    expect_matrix(weight, path, "[out, in] (a Linear weight)");
    width = weight.shape[0];
    w = transposed(weight, 0, width);
    p.sources.emplace_back(w_name, weight.name + " (transposed)");
    p.dtypes.insert(weight.dtype);
    if (!bias) return;
    expect_rank(*bias, 1, path, "[" + std::to_string(width) + "] (the bias of " + weight.name + ")");
    if (bias->shape[0] != width) {
        invalid(path + ": tensor " + bias->name + " has shape " + shape_text(bias->shape) + ", expected [" + std::to_string(width) +
                "] (the rows of " + weight.name + ")");
    }
    b = bias->values;
    p.sources.emplace_back(b_name, bias->name);
    p.dtypes.insert(bias->dtype);
}

Projections read_multihead(const Layer& layer) {
    Projections p;
    const std::string& path = layer.path();
    if (std::optional<Tensor> packed = layer.optional("in_proj_weight")) {
        expect_matrix(*packed, path, "[3E, E] (queries, keys and values stacked)");
        if (packed->shape[0] % 3 != 0) {
            invalid(path + ": tensor " + packed->name + " has shape " + shape_text(packed->shape) +
                    ", expected [3E, E]: its rows do not split into queries, keys and values");
        }
        const std::int64_t e = packed->shape[0] / 3;
        p.w_q = transposed(*packed, 0, e);
        p.w_k = transposed(*packed, e, e);
        p.w_v = transposed(*packed, 2 * e, e);
        p.q_width = p.k_width = p.v_width = e;
        p.sources.emplace_back(dataset::w_q, packed->name + "[0:" + std::to_string(e) + "] (transposed)");
        p.sources.emplace_back(dataset::w_k, packed->name + "[" + std::to_string(e) + ":" + std::to_string(2 * e) + "] (transposed)");
        p.sources.emplace_back(dataset::w_v, packed->name + "[" + std::to_string(2 * e) + ":" + std::to_string(3 * e) + "] (transposed)");
        p.dtypes.insert(packed->dtype);
    } else {
        take_linear(p, layer.required("q_proj_weight"), std::nullopt, path, dataset::w_q, dataset::b_q, p.w_q, p.b_q, p.q_width);
        take_linear(p, layer.required("k_proj_weight"), std::nullopt, path, dataset::w_k, dataset::b_k, p.w_k, p.b_k, p.k_width);
        take_linear(p, layer.required("v_proj_weight"), std::nullopt, path, dataset::w_v, dataset::b_v, p.w_v, p.b_v, p.v_width);
    }
    if (std::optional<Tensor> bias = layer.optional("in_proj_bias")) {
        expect_rank(*bias, 1, path, "[3E]");
        const std::int64_t e = p.q_width;
        if (bias->shape[0] != p.q_width + p.k_width + p.v_width) {
            invalid(path + ": tensor " + bias->name + " has shape " + shape_text(bias->shape) + ", expected [" +
                    std::to_string(p.q_width + p.k_width + p.v_width) + "] (the biases of queries, keys and values)");
        }
        p.b_q = slice(*bias, 0, e);
        p.b_k = slice(*bias, e, p.k_width);
        p.b_v = slice(*bias, e + p.k_width, p.v_width);
        p.sources.emplace_back(dataset::b_q, bias->name + "[0:" + std::to_string(e) + "]");
        p.sources.emplace_back(dataset::b_k, bias->name + "[" + std::to_string(e) + ":" + std::to_string(e + p.k_width) + "]");
        p.sources.emplace_back(dataset::b_v, bias->name + "[" + std::to_string(e + p.k_width) + ":" +
                                                 std::to_string(e + p.k_width + p.v_width) + "]");
    }
    take_linear(p, layer.required("out_proj.weight"), layer.optional("out_proj.bias"), path, dataset::w_o, dataset::b_o, p.w_o,
                p.b_o, p.d_out);
    return p;
}

Projections read_named(const Layer& layer, const std::string& q, const std::string& k, const std::string& v,
                       const std::optional<std::string>& o, bool o_required) {
    Projections p;
    const std::string& path = layer.path();
    take_linear(p, layer.required(q + ".weight"), layer.optional(q + ".bias"), path, dataset::w_q, dataset::b_q, p.w_q, p.b_q, p.q_width);
    take_linear(p, layer.required(k + ".weight"), layer.optional(k + ".bias"), path, dataset::w_k, dataset::b_k, p.w_k, p.b_k, p.k_width);
    take_linear(p, layer.required(v + ".weight"), layer.optional(v + ".bias"), path, dataset::w_v, dataset::b_v, p.w_v, p.b_v, p.v_width);
    if (o && (o_required || layer.optional(*o + ".weight"))) {
        take_linear(p, layer.required(*o + ".weight"), layer.optional(*o + ".bias"), path, dataset::w_o, dataset::b_o, p.w_o, p.b_o,
                    p.d_out);
    }
    return p;
}

Projections read_projections(const SafetensorsFile& model, const AttentionLayer& layer) {
    const Layer view(model, layer);
    if (layer.naming == "nn.MultiheadAttention") return read_multihead(view);
    if (layer.naming == "llama") return read_named(view, "q_proj", "k_proj", "v_proj", std::string("o_proj"), true);
    // bert: P.self.query... with P.output.dense, or P (the self module).query... with the
    // output beside P when P ends in "self".
    if (model.find(joined(layer.prefix, "self.query.weight"))) {
        return read_named(view, "self.query", "self.key", "self.value", std::string("output.dense"), true);
    }
    Projections p = read_named(view, "query", "key", "value", std::nullopt, false);
    if (ends_with(layer.prefix, "self")) {
        const std::string parent = layer.prefix.size() > 5 ? layer.prefix.substr(0, layer.prefix.size() - 5) : std::string();
        const Layer outer(model, AttentionLayer{parent, layer.naming});
        if (std::optional<Tensor> w = outer.optional("output.dense.weight")) {
            take_linear(p, *w, outer.optional("output.dense.bias"), model.path(), dataset::w_o, dataset::b_o, p.w_o, p.b_o, p.d_out);
        }
    }
    return p;
}

// Row-major values of a [rows, columns] matrix (or a vector: one row) as a ValueSource.
ValueSource values_of(const std::vector<float>& values, std::int64_t columns) {
    return [&values, columns](const Dims& index, std::size_t count, double* out) {
        const std::size_t start = index.size() == 2 ? static_cast<std::size_t>(index[0] * static_cast<std::uint64_t>(columns) + index[1])
                                                    : static_cast<std::size_t>(index[0]);
        for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<double>(values[start + i]);
    };
}

}  // namespace

std::vector<AttentionLayer> find_attention_layers(const SafetensorsFile& model) {
    std::map<std::string, std::string> layers;  // prefix -> naming
    for (const SafetensorsTensor& tensor : model.tensors()) {
        for (const Marker& marker : kMarkers) {
            if (!ends_with(tensor.name, marker.suffix)) continue;
            std::string prefix = tensor.name.substr(0, tensor.name.size() - std::string(marker.suffix).size());
            if (!prefix.empty() && prefix.back() != '.') continue;  // "xq_proj.weight" is not "q_proj.weight"
            if (!prefix.empty()) prefix.pop_back();
            // BERT's query.weight inside a module with self.query.weight is the same layer.
            if (std::string(marker.suffix) == "query.weight" && ends_with(tensor.name, "self.query.weight")) break;
            layers.emplace(prefix, marker.naming);
            break;
        }
    }
    std::vector<AttentionLayer> found;
    for (const auto& [prefix, naming] : layers) found.push_back(AttentionLayer{prefix, naming});
    return found;
}

ImportedWeights import_weights(const ImportRequest& request) {
    // --force replaces --output, so an output that is the model or its config.json (another
    // spelling, a link) would destroy what is read; refused before anything is read.
    check_output_is_not_an_input(request.output,
                                 {{"--input", request.input}, {"its config.json", directory_of(request.input) + "/config.json"}});
    const SafetensorsFile model(request.input);
    const std::vector<AttentionLayer> layers = find_attention_layers(model);
    const auto described = [&]() {
        std::vector<std::string> items;
        for (const AttentionLayer& l : layers) items.push_back((l.prefix.empty() ? "(top level)" : l.prefix) + " (" + l.naming + ")");
        return list_text(items, 16);
    };
    if (layers.empty()) {
        std::vector<std::string> names;
        for (const SafetensorsTensor& t : model.tensors()) names.push_back(t.name);
        invalid(request.input + ": no attention layer found: expected nn.MultiheadAttention (in_proj_weight, out_proj.weight), "
                "BERT-like (self.query.weight, ...) or Llama-like (q_proj.weight, ...) tensors; found " +
                std::to_string(names.size()) + " tensors: " + list_text(names));
    }
    std::string prefix = request.prefix;
    while (!prefix.empty() && prefix.back() == '.') prefix.pop_back();
    const AttentionLayer* chosen = nullptr;
    if (!request.prefix.empty()) {
        for (const AttentionLayer& l : layers) {
            if (l.prefix == prefix) chosen = &l;
        }
        if (!chosen) usage("--prefix " + request.prefix + " names no attention layer of " + request.input + "; its layers: " + described());
    } else if (layers.size() == 1) {
        chosen = &layers.front();
    } else {
        usage(request.input + " has " + std::to_string(layers.size()) + " attention layers: " + described() +
              "; hint: --prefix picks one, e.g. --prefix " + layers.front().prefix);
    }
    const AttentionLayer layer = *chosen;
    Projections p = read_projections(model, layer);
    const ModelConfig config = read_config(request.input);

    ImportedWeights result;
    result.layer = layer;
    result.config_path = config.path;
    result.model_type = config.model_type;
    result.rope_theta = config.rope_theta;
    // Every matrix reads the same embeddings X: the same number of rows (in features).
    p.d = static_cast<std::int64_t>(p.w_q.size()) / p.q_width;
    for (const auto& [name, width, values] : {std::tuple<const char*, std::int64_t, const std::vector<float>*>{dataset::w_k, p.k_width, &p.w_k},
                                              {dataset::w_v, p.v_width, &p.w_v}}) {
        const std::int64_t rows = static_cast<std::int64_t>(values->size()) / width;
        if (rows != p.d) {
            invalid(request.input + ": the layer's " + std::string(name + 1) + " projection reads " + std::to_string(rows) +
                    " features but its query projection " + std::to_string(p.d) +
                    "; expected self-attention, where queries, keys and values all project the same embeddings");
        }
    }

    const std::string heads_source = request.heads != 0 ? "--heads" : "num_attention_heads of " + config.path;
    result.heads = head_count(request.heads, config.heads, "--heads", "num_attention_heads", config);
    if (result.heads == 0) {
        usage(request.input + ": the head count is not stored in a model's tensors and no config.json gives it; hint: --heads H, "
              "H dividing the " + std::to_string(p.q_width) + " query columns (" + divisors_of(p.q_width) + ")");
    }
    if (p.q_width % result.heads != 0) {
        const std::string what = "H = " + std::to_string(result.heads) + " (" + heads_source + ") does not divide the " +
                                 std::to_string(p.q_width) + " output features of the query projection of " + request.input;
        if (request.heads != 0) usage("--heads " + std::to_string(result.heads) + ": " + what + "; hint: H among " + divisors_of(p.q_width));
        invalid(what + "; expected a configuration that fits its tensors");
    }
    result.d_k = p.q_width / result.heads;
    result.kv_heads = head_count(request.kv_heads, config.kv_heads, "--kv-heads", "num_key_value_heads", config);
    const std::int64_t shape_groups = p.k_width % result.d_k == 0 ? p.k_width / result.d_k : 0;
    if (result.kv_heads == 0) result.kv_heads = shape_groups;
    if (result.kv_heads == 0 || shape_groups != result.kv_heads || result.heads % result.kv_heads != 0) {
        const std::string found = "the key projection has " + std::to_string(p.k_width) + " output features, d_k = " +
                                  std::to_string(result.d_k) + " (" + std::to_string(p.q_width) + " query features / H = " +
                                  std::to_string(result.heads) + ")";
        if (shape_groups != 0 && result.heads % shape_groups == 0) {
            usage("--kv-heads " + std::to_string(result.kv_heads) + " contradicts " + request.input + ": " + found + ", so G = " +
                  std::to_string(shape_groups) + "; hint: omit --kv-heads");
        }
        invalid(request.input + ": " + found + ": no number of K/V heads G dividing H fits; hint: check --heads");
    }
    if (p.v_width % result.kv_heads != 0) {
        invalid(request.input + ": the value projection has " + std::to_string(p.v_width) + " output features, which do not split into G = " +
                std::to_string(result.kv_heads) + " K/V heads");
    }
    result.d_v = p.v_width / result.kv_heads;
    result.d = p.d;
    if (!p.w_o.empty()) {
        result.d_out = p.d_out;
        const std::int64_t o_in = static_cast<std::int64_t>(p.w_o.size()) / p.d_out;
        if (o_in != result.heads * result.d_v) {
            invalid(request.input + ": the output projection reads " + std::to_string(o_in) + " features, expected H*d_v = " +
                    std::to_string(result.heads) + "*" + std::to_string(result.d_v) + " = " + std::to_string(result.heads * result.d_v) +
                    " (the heads' values side by side)");
        }
    }
    for (const std::string& dtype : p.dtypes) {
        if (dtype != "F32") result.notes.push_back(dtype + " tensors converted to float32");
    }
    if (config.rope_scaling) {
        result.notes.push_back(config.path + " has rope_scaling, which run does not apply (plain rotary embeddings only)");
    }
    result.datasets = p.sources;

    // The file: written by the weights writer `generate` uses, as OUTPUT.partial and renamed
    // once whole.
    WeightsContent content;
    content.d = p.d;
    content.heads = result.heads;
    content.kv_heads = result.kv_heads;
    content.d_k = result.d_k;
    content.d_v = result.d_v;
    content.d_out = result.d_out;
    content.w_q = values_of(p.w_q, p.q_width);
    content.w_k = values_of(p.w_k, p.k_width);
    content.w_v = values_of(p.w_v, p.v_width);
    if (!p.w_o.empty()) content.w_o = values_of(p.w_o, p.d_out);
    const std::pair<ValueSource*, const std::vector<float>*> biases[] = {
        {&content.b_q, &p.b_q}, {&content.b_k, &p.b_k}, {&content.b_v, &p.b_v}, {&content.b_o, &p.b_o}};
    for (const auto& [source, values] : biases) {
        if (!values->empty()) *source = values_of(*values, static_cast<std::int64_t>(values->size()));
    }
    content.source_tensors = std::map<std::string, std::string>(p.sources.begin(), p.sources.end());
    WeightsRecord record;
    record.generator = request.generator;
    WeightsRecord::Import& made = record.import.emplace();
    made.source = real_path(request.input);
    made.source_format = "safetensors";
    made.layer = layer.prefix;
    made.naming = layer.naming;
    std::set<std::string> seen;
    for (const auto& [name, source] : p.sources) {
        const std::string tensor = source.substr(0, source.find_first_of("[ "));
        if (seen.insert(tensor).second) made.tensors += (made.tensors.empty() ? "" : ",") + tensor;
    }
    made.model_type = config.model_type;
    made.rope_theta = config.rope_theta;

    prepare_new_file("--output", request.output, request.force, weights_bytes(content));
    StagedFile staged(request.output);
    try {
        File file = staged.create();
        write_weights(file, content, record);
        file.close();
    } catch (const H5Error& error) {
        throw Error(exit_io, request.output + ": cannot write the weights: " + error.what());
    }
    staged.publish(request.force);
    return result;
}

}  // namespace attnbatch::io
