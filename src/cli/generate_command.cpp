// `attnbatch generate`: a seeded synthetic input file (embeddings, or Q/K/V, with optional
// ragged lengths) and optionally a projection weights file. The numbers come from a
// counter-based generator (random_field.hpp), so a file's content depends on the seed and the
// shapes only, never on how it was written; memory stays bounded whatever N is.
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "attnbatch/io/h5/file_paths.hpp"
#include "attnbatch/io/input/input_writer.hpp"
#include "attnbatch/io/input/reserved_names.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "random_field.hpp"

namespace attnbatch::cli {

using io::shape_text;
namespace {

// The independent random streams of one seed. The numbers are part of the file format's
// reproducibility: renumbering one changes every file generated from then on.
enum Stream : std::uint64_t {
    stream_embeddings = 1,
    stream_lengths = 2,
    stream_query = 3,
    stream_key = 4,
    stream_value = 5,
    stream_w_q = 6,
    stream_w_k = 7,
    stream_w_v = 8,
    stream_w_o = 9,
    stream_b_q = 10,
    stream_b_k = 11,
    stream_b_v = 12,
    stream_b_o = 13,
};

struct GenerateRequest {
    std::string output;
    std::string weights_out;  // empty: no weights file
    bool force = false;
    std::int64_t n = 0, len = 0, dim = 0, heads = 1;
    std::int64_t kv_heads = 0;  // G of keys and values (weights or Q/K/V); 0: G = H
    std::int64_t head_dim = 0, value_dim = 0, out_dim = 0;  // d_k, d_v, d_out
    std::optional<std::int64_t> min_len;
    bool qkv = false;
    bool split = false;
    bool packed_sequences = false;  // --layout packed
    bool float64 = false;
    std::uint64_t seed = 0;
    double scale = 1.0;
    std::string dataset;
    bool output_projection = true;
    bool bias = true;
    std::size_t slab_bytes = io::default_slab_bytes;

    io::DataType dtype() const { return float64 ? io::DataType::float64 : io::DataType::float32; }
};

[[noreturn]] void usage(const std::string& message) { throw Error(exit_usage, message); }

std::int64_t positive(const po::variables_map& vm, const char* name) {
    const int value = vm[name].as<int>();
    if (value < 1) {
        usage(std::string("--") + name + ": " + std::to_string(value) + " is out of range, expected 1.." +
              std::to_string(INT_MAX));
    }
    return value;
}

std::optional<std::int64_t> optional_positive(const po::variables_map& vm, const char* name) {
    if (!vm.count(name)) return std::nullopt;
    return positive(vm, name);
}

std::string divisors(std::int64_t value) {
    std::string text;
    int listed = 0;
    for (std::int64_t h = 1; h <= value && listed < 8; ++h) {
        if (value % h != 0) continue;
        text += (listed ? " " : "") + std::to_string(h);
        ++listed;
    }
    return listed == 8 ? text + " ..." : text;
}

std::uint64_t parse_seed(const std::string& text) {
    std::uint64_t seed = 0;
    const char* end = text.data() + text.size();
    const auto [stop, error] = std::from_chars(text.data(), end, seed);
    if (text.empty() || error != std::errc() || stop != end || seed > static_cast<std::uint64_t>(INT64_MAX)) {
        usage("--seed: '" + text + "' is not an integer in 0.." + std::to_string(INT64_MAX));
    }
    return seed;
}

// A valid absolute HDF5 object path, or a usage error naming the option. HDF5 reads a "."
// component as the group it is in, so "/./lengths" is dropped to "/lengths", the name the
// file will show.
std::string object_path(const std::string& option, std::string path) {
    if (!path.empty() && path[0] != '/') path = "/" + path;
    for (std::size_t at; (at = path.find("/./")) != std::string::npos;) path.erase(at, 2);
    if (path.size() < 2 || path.back() == '/' || path.find("//") != std::string::npos ||
        path.compare(path.size() - 2, 2, "/.") == 0) {
        usage(option + ": '" + path + "' is not a dataset path, expected e.g. /embeddings");
    }
    return path;
}

// Every option alone, then every combination; nothing is created before this returns.
GenerateRequest request_from(const po::variables_map& vm) {
    GenerateRequest request;
    request.output = vm.count("output") ? vm["output"].as<std::string>() : std::string();
    if (request.output.empty()) usage("--output is required: the HDF5 file to write (e.g. --output data.h5)");
    request.force = vm["force"].as<bool>();
    request.n = positive(vm, "num-seqs");
    request.len = positive(vm, "seq-len");
    request.dim = positive(vm, "dim");
    request.heads = positive(vm, "heads");
    if (vm.count("kv-heads")) {
        request.kv_heads = positive(vm, "kv-heads");
        if (request.heads % request.kv_heads != 0) {
            usage("--kv-heads " + std::to_string(request.kv_heads) + " does not divide --heads " + std::to_string(request.heads) +
                  " (query head h reads K/V head h / (H/G))");
        }
    }
    if (vm.count("min-len")) {
        const int min_len = vm["min-len"].as<int>();
        if (min_len < 0) usage("--min-len: " + std::to_string(min_len) + " is negative, expected 0 <= M <= --seq-len");
        if (min_len > request.len) {
            usage("--min-len " + std::to_string(min_len) + " exceeds --seq-len " + std::to_string(request.len) +
                  ", expected 0 <= M <= L");
        }
        request.min_len = min_len;
    }
    const std::string dtype = vm["dtype"].as<std::string>();
    if (dtype == "float32" || dtype == "f32") {
        request.float64 = false;
    } else if (dtype == "float64" || dtype == "f64") {
        request.float64 = true;
    } else {
        usage("--dtype: '" + dtype + "' is not one of float32|float64");
    }
    request.qkv = vm["qkv"].as<bool>();
    const std::string layout = vm["qkv-layout"].as<std::string>();
    if (layout != "packed" && layout != "split") usage("--qkv-layout: '" + layout + "' is not one of packed|split");
    if (!vm["qkv-layout"].defaulted() && !request.qkv) usage("--qkv-layout applies only with --qkv");
    request.split = layout == "split";
    const std::string sequence_layout = vm["layout"].as<std::string>();
    if (sequence_layout != "padded" && sequence_layout != "packed") {
        usage("--layout: '" + sequence_layout + "' is not one of padded|packed");
    }
    request.packed_sequences = sequence_layout == "packed";
    if (request.packed_sequences && request.split) {
        usage("--layout packed stores every sequence's rows end to end, [T, H*d]: it cannot go with --qkv-layout split");
    }
    request.seed = parse_seed(vm["seed"].as<std::string>());
    request.scale = vm["scale-values"].as<double>();
    if (!std::isfinite(request.scale) || std::fabs(request.scale) > 1e30) {
        std::ostringstream found;
        found << request.scale;
        usage("--scale-values: " + found.str() + " is out of range, expected a finite number with |S| <= 1e30");
    }
    const long long slab_bytes = vm["slab-bytes"].as<long long>();
    if (slab_bytes < 1) usage("--slab-bytes: " + std::to_string(slab_bytes) + " is out of range, expected at least 1");
    request.slab_bytes = static_cast<std::size_t>(slab_bytes);

    request.weights_out = vm.count("weights-out") ? vm["weights-out"].as<std::string>() : std::string();
    const bool weights = !request.weights_out.empty();
    if (request.qkv && weights) {
        usage("--weights-out writes projections of embeddings and cannot go with --qkv; hint: drop one of them");
    }
    if (request.qkv && !vm["dataset"].defaulted()) {
        usage("--dataset names the embeddings and cannot go with --qkv (which writes /query, /key, /value)");
    }
    request.dataset = object_path("--dataset", vm["dataset"].defaulted() && request.packed_sequences
                                                ? std::string(io::dataset::tokens)
                                                : vm["dataset"].as<std::string>());
    // run would read such a dataset as what its name says, and not find the embeddings.
    const std::string meaning = io::input_schema_meaning(request.dataset, request.packed_sequences);
    if (!meaning.empty()) {
        usage("--dataset " + request.dataset + ": in the input schema it is the name of " + meaning +
              "; expected another path for the embeddings, e.g. the default " +
              (request.packed_sequences ? io::dataset::tokens : io::dataset::embeddings));
    }
    // Two spellings of one path ("a.h5", "./a.h5", a link, a dangling link to the other): one
    // file would replace the other, or a link the user made.
    if (weights && io::same_file(request.weights_out, request.output)) {
        usage("--weights-out " + request.weights_out + " names the same file as --output " + request.output +
              ", expected a different path");
    }

    const std::optional<std::int64_t> head_dim = optional_positive(vm, "head-dim");
    const std::optional<std::int64_t> value_dim = optional_positive(vm, "value-dim");
    const std::optional<std::int64_t> out_dim = optional_positive(vm, "out-dim");
    const bool projects = weights || request.qkv;
    if (request.kv_heads > 0 && !projects) usage("--kv-heads applies only with --weights-out or --qkv");
    if (head_dim && !projects) usage("--head-dim applies only with --weights-out or --qkv");
    if (value_dim && !projects) usage("--value-dim applies only with --weights-out or --qkv");
    if (out_dim && !weights) usage("--out-dim applies only with --weights-out");
    request.output_projection = !vm["no-output-projection"].as<bool>();
    request.bias = !vm["no-bias"].as<bool>();
    if (!request.output_projection && !weights) usage("--no-output-projection applies only with --weights-out");
    if (!request.bias && !weights) usage("--no-bias applies only with --weights-out");
    if (out_dim && !request.output_projection) usage("--out-dim and --no-output-projection exclude each other");
    if (!head_dim && request.dim % request.heads != 0) {
        usage("--heads " + std::to_string(request.heads) + " does not divide --dim " + std::to_string(request.dim) +
              "; hint: choose among " + divisors(request.dim) + ", or give --head-dim");
    }
    request.head_dim = head_dim ? *head_dim : request.dim / request.heads;
    request.value_dim = value_dim ? *value_dim : request.head_dim;
    request.out_dim = out_dim ? *out_dim : request.dim;
    for (const auto& [option, width] : {std::pair{"--head-dim", request.head_dim}, std::pair{"--value-dim", request.value_dim}}) {
        if (request.heads * width > INT_MAX) {
            usage(std::string("--heads ") + std::to_string(request.heads) + " x " + option + " " + std::to_string(width) +
                  " = " + std::to_string(request.heads * width) + " exceeds " + std::to_string(INT_MAX));
        }
    }
    return request;
}

// Lengths uniform in [M, L]; L for every sequence without --min-len.
class LengthDraw {
public:
    explicit LengthDraw(const GenerateRequest& request)
        : field_(request.seed, stream_lengths),
          min_(request.min_len.value_or(request.len)),
          span_(request.len - min_ + 1) {}
    std::int64_t operator()(std::uint64_t sequence) const {
        if (span_ == 1) return min_;
        const auto draw = static_cast<std::int64_t>(field_.row(sequence).uniform(0) * static_cast<double>(span_));
        return min_ + std::min(draw, span_ - 1);
    }

private:
    RandomField field_;
    std::int64_t min_;
    std::int64_t span_;
};

// Sequence data of packed width W: the value at (n, l, c) of the packed view [N, L, W] is
// number l*W + c of row n. The split view [N, H, L, W/H] holds the same numbers with the
// head axis moved forward, so a split file is the transpose of the packed one. Tokens at or
// beyond the sequence's length are zeros.
io::ValueSource sequence_values(const GenerateRequest& request, std::uint64_t stream, std::uint64_t width, bool split,
                                std::int64_t heads = 0) {
    const RandomField field(request.seed, stream);
    const LengthDraw length(request);
    const double scale = request.scale;
    const std::uint64_t head_width = width / static_cast<std::uint64_t>(heads > 0 ? heads : request.heads);
    return [=](const io::Dims& index, std::size_t count, double* out) {
        const std::uint64_t sequence = index[0];
        const std::uint64_t token = split ? index[2] : index[1];
        if (static_cast<std::int64_t>(token) >= length(sequence)) {
            std::fill(out, out + count, 0.0);
            return;
        }
        const std::uint64_t first = split ? token * width + index[1] * head_width + index[3] : token * width + index[2];
        const RandomField::Row row = field.row(sequence);
        for (std::size_t i = 0; i < count; ++i) out[i] = scale * row.normal(first + i);
    };
}

// The packed layout's rows [T, W]: row t is token t - offsets[n] of the sequence n holding it,
// with the numbers it has in the padded layout, so that the two layouts hold the same tokens.
io::ValueSource packed_values(std::shared_ptr<const std::vector<std::int64_t>> offsets, io::ValueSource padded) {
    return [offsets = std::move(offsets), padded = std::move(padded)](const io::Dims& index, std::size_t count, double* out) {
        const auto t = static_cast<std::int64_t>(index[0]);
        const auto after = std::upper_bound(offsets->begin(), offsets->end(), t);
        const auto sequence = static_cast<std::uint64_t>(after - offsets->begin() - 1);
        padded({sequence, static_cast<std::uint64_t>(t - (*offsets)[sequence]), index[1]}, count, out);
    };
}

// A weights matrix [rows, columns] (random row r for matrix row r) or bias [columns] (random row 0), N(0, stddev^2).
io::ValueSource weight_values(const GenerateRequest& request, std::uint64_t stream, double stddev) {
    const RandomField field(request.seed, stream);
    return [=](const io::Dims& index, std::size_t count, double* out) {
        const RandomField::Row row = field.row(index.size() == 2 ? index[0] : 0);
        const std::uint64_t first = index.back();
        for (std::size_t i = 0; i < count; ++i) out[i] = stddev * row.normal(first + i);
    };
}

struct LengthRange {
    std::int64_t min = INT64_MAX;
    std::int64_t max = INT64_MIN;
};

// What the input file holds; `range` collects the lengths drawn as they are written.
io::InputContent input_content(const GenerateRequest& request, LengthRange& range) {
    io::InputContent content;
    content.dtype = request.dtype();
    content.n = request.n;
    content.len = request.len;
    content.heads = request.heads;
    const auto heads = static_cast<std::uint64_t>(request.heads);
    if (!request.qkv) {
        content.mode = io::InputMode::embeddings;
        content.d = request.dim;
        content.embeddings_path = request.dataset;
        content.embeddings = sequence_values(request, stream_embeddings, static_cast<std::uint64_t>(request.dim), false);
    } else {
        content.mode = io::InputMode::qkv;
        content.layout = request.split ? io::QkvLayout::split : io::QkvLayout::packed;
        content.d_k = request.head_dim;
        content.d_v = request.value_dim;
        const std::int64_t kv_heads = request.kv_heads > 0 ? request.kv_heads : request.heads;
        content.kv_heads = request.kv_heads;
        const auto qk_width = heads * static_cast<std::uint64_t>(request.head_dim);
        const auto k_width = static_cast<std::uint64_t>(kv_heads * request.head_dim);
        const auto v_width = static_cast<std::uint64_t>(kv_heads * request.value_dim);
        content.query = sequence_values(request, stream_query, qk_width, request.split);
        content.key = sequence_values(request, stream_key, k_width, request.split, kv_heads);
        content.value = sequence_values(request, stream_value, v_width, request.split, kv_heads);
    }
    if (request.packed_sequences) {
        // The offsets are the lengths' running sum, written whole: memory of 8 bytes a sequence.
        const LengthDraw length(request);
        auto offsets = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(request.n) + 1, 0);
        for (std::int64_t n = 0; n < request.n; ++n) {
            const std::int64_t value = length(static_cast<std::uint64_t>(n));
            range.min = std::min(range.min, value);
            range.max = std::max(range.max, value);
            (*offsets)[static_cast<std::size_t>(n) + 1] = (*offsets)[static_cast<std::size_t>(n)] + value;
        }
        if (offsets->back() == 0) usage("--layout packed: every sequence drew length 0, so there are no rows to write; hint: a larger --min-len");
        content.packed = true;
        content.offsets = *offsets;
        if (content.mode == io::InputMode::embeddings) {
            content.embeddings = packed_values(offsets, content.embeddings);
        } else {
            content.query = packed_values(offsets, content.query);
            content.key = packed_values(offsets, content.key);
            content.value = packed_values(offsets, content.value);
        }
        return content;
    }
    if (request.min_len) {
        const LengthDraw length(request);
        content.lengths = [length, &range](const io::Dims& index, std::size_t count, double* out) {
            for (std::size_t i = 0; i < count; ++i) {
                const std::int64_t value = length(index[0] + i);
                range.min = std::min(range.min, value);
                range.max = std::max(range.max, value);
                out[i] = static_cast<double>(value);
            }
        };
    }
    return content;
}

// Weights N(0, 1/fan_in), biases too: with standard-normal embeddings the projections stay
// near unit variance and the scaled logits in range.
io::WeightsContent weights_content(const GenerateRequest& request) {
    io::WeightsContent content;
    content.dtype = request.dtype();
    content.d = request.dim;
    content.heads = request.heads;
    content.kv_heads = request.kv_heads != request.heads ? request.kv_heads : 0;  // G = H is not grouped: not stated
    content.d_k = request.head_dim;
    content.d_v = request.value_dim;
    content.d_out = request.out_dim;
    const double in_scale = 1.0 / std::sqrt(static_cast<double>(request.dim));
    const double out_scale = 1.0 / std::sqrt(static_cast<double>(request.heads * request.value_dim));
    content.w_q = weight_values(request, stream_w_q, in_scale);
    content.w_k = weight_values(request, stream_w_k, in_scale);
    content.w_v = weight_values(request, stream_w_v, in_scale);
    if (request.output_projection) content.w_o = weight_values(request, stream_w_o, out_scale);
    if (request.bias) {
        content.b_q = weight_values(request, stream_b_q, in_scale);
        content.b_k = weight_values(request, stream_b_k, in_scale);
        content.b_v = weight_values(request, stream_b_v, in_scale);
        if (request.output_projection) content.b_o = weight_values(request, stream_b_o, out_scale);
    }
    return content;
}

std::string summary(const std::string& path, const std::vector<io::WrittenDataset>& written, const std::string& extra) {
    struct stat status {};
    const long long bytes = ::stat(path.c_str(), &status) == 0 ? static_cast<long long>(status.st_size) : -1;
    std::string text = "attnbatch generate: wrote " + path + " (" + std::to_string(bytes) + " bytes):";
    for (std::size_t i = 0; i < written.size(); ++i) {
        text += (i ? ", " : " ") + written[i].path + " " + written[i].dtype + " " + shape_text(written[i].dims);
    }
    return text + extra;
}

}  // namespace

int generate_command(const std::vector<std::string>& args) {
    const CommandSpec spec{
        "generate",
        "Writes a synthetic input file: standard-normal embeddings [N, L, d] (or Q, K, V with --qkv),\n"
        "ragged lengths with --min-len, and projection weights with --weights-out. The content depends\n"
        "only on the seed and the shapes: the same options give the same numbers, in any slab size.\n"
        "Without --min-len no /lengths is written (every sequence has L tokens). Tokens at or beyond a\n"
        "sequence's length are zeros. --layout packed writes the same tokens without padding: /tokens\n"
        "[T, d] (or /query /key /value [T, H*d]) and /offsets int64 [N+1], sequence n in rows\n"
        "offsets[n]..offsets[n+1]. Weights and biases are N(0, 1/fan_in). The file is written as\n"
        "FILE.partial and renamed when whole; an existing FILE is replaced only with --force.",
        "  attnbatch generate --output data.h5 --num-seqs 1000 --seq-len 256 --dim 64 --seed 7\n"
        "  attnbatch generate --output ragged.h5 --num-seqs 64 --seq-len 512 --min-len 32 --heads 8 --weights-out w.h5\n"
        "  attnbatch generate --output qkv.h5 --qkv --qkv-layout split --heads 4 --head-dim 32 --dtype float64\n"
        "  attnbatch generate --output big-logits.h5 --scale-values 30 --force\n"
        "  attnbatch generate --output ragged-packed.h5 --layout packed --num-seqs 1000 --seq-len 2048 --min-len 1\n"};
    po::options_description options("generate options");
    options.add_options()
        ("output", po::value<std::string>()->value_name("FILE"), "the input file to write (required)")
        ("force", po::bool_switch(), "replace an existing --output / --weights-out")
        ("num-seqs", po::value<int>()->default_value(16), "sequences N")
        ("seq-len", po::value<int>()->default_value(128), "tokens per sequence L (padded length)")
        ("dim", po::value<int>()->default_value(64), "embedding width d")
        ("min-len", po::value<int>()->value_name("M"),
         "ragged lengths: each sequence's length uniform in [M, L], written as int32 /lengths [N]")
        ("heads", po::value<int>()->default_value(1), "heads H (must divide --dim unless --head-dim is given)")
        ("kv-heads", po::value<int>(), "grouped-query attention: G K/V heads (G divides H), with --weights-out (w_k, w_v of G*d_k, G*d_v columns) or --qkv [H]")
        ("weights-out", po::value<std::string>()->value_name("FILE"),
         "also write projections /w_q /w_k [d, H*d_k], /w_v [d, H*d_v], /w_o [H*d_v, d_out], /b_q /b_k /b_v /b_o")
        ("head-dim", po::value<int>()->value_name("d_k"), "per-head width of queries and keys [d/H]")
        ("value-dim", po::value<int>()->value_name("d_v"), "per-head width of values [d_k]")
        ("out-dim", po::value<int>()->value_name("d_out"), "columns of /w_o [d]")
        ("no-output-projection", po::bool_switch(), "omit /w_o and /b_o")
        ("no-bias", po::bool_switch(), "omit the biases /b_q /b_k /b_v /b_o")
        ("qkv", po::bool_switch(), "write /query /key [N, L, H*d_k] and /value [N, L, H*d_v] instead of embeddings")
        ("qkv-layout", po::value<std::string>()->default_value("packed"),
         "packed: [N, L, H*d] (heads side by side); split: [N, H, L, d] (same numbers, transposed)")
        ("dtype", po::value<std::string>()->default_value("float32"), "float32|float64, for data and weights")
        ("seed", po::value<std::string>()->default_value("0"), "random seed, 0..2^63-1")
        ("scale-values", po::value<double>()->default_value(1.0),
         "multiply the data by S (large S gives large logits)")
        ("layout", po::value<std::string>()->default_value("padded"),
         "padded: [N, L, ...] with /lengths; packed: rows end to end, [T, ...] with /offsets int64 [N+1]")
        ("dataset", po::value<std::string>()->default_value(io::dataset::embeddings),
         "path of the embeddings dataset [/tokens with --layout packed]")
        ("slab-bytes", po::value<long long>()->default_value(static_cast<long long>(io::default_slab_bytes)),
         "memory bound of one write; the content does not depend on it");
    po::variables_map vm;
    if (!parse_command_line(spec, options, args, vm)) return exit_ok;
    const GenerateRequest request = request_from(vm);

    io::InputDestination destination;
    destination.path = request.output;
    destination.weights_path = request.weights_out;
    destination.force = request.force;
    destination.slab_bytes = request.slab_bytes;
    io::GeneratorRecord record;
    record.generator = std::string("attnbatch generate ") + ATTNBATCH_VERSION;
    record.seed = request.seed;
    record.scale_values = request.scale;
    record.min_len = request.min_len;
    LengthRange range;
    std::optional<io::WeightsContent> weights;
    if (!request.weights_out.empty()) weights = weights_content(request);
    const io::WrittenInput written = io::write_input_files(destination, input_content(request, range), weights, record);

    std::string extra;
    if (request.min_len) extra += ", lengths " + std::to_string(range.min) + ".." + std::to_string(range.max);
    if (request.scale != 1.0) {
        std::ostringstream scale;
        scale << request.scale;
        extra += ", values x " + scale.str();
    }
    extra += ", seed " + std::to_string(request.seed);
    std::cout << summary(request.output, written.input, extra) << '\n';
    if (weights) std::cout << summary(request.weights_out, written.weights, ", seed " + std::to_string(request.seed)) << '\n';
    return exit_ok;
}

}  // namespace attnbatch::cli
