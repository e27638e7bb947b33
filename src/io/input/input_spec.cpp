// describe_input: every rule the input must satisfy, checked before any compute. Each
// failure is one line: file, dataset or option, expected versus found, and a hint.
#include "attnbatch/io/input/input_spec.hpp"

#include "attnbatch/io/h5/attribute.hpp"
#include "attnbatch/io/h5/error.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "attnbatch/io/input/npy_shards.hpp"
#include "attnbatch/io/input/value_scan.hpp"
#include "h5/dataset_rules.hpp"
#include "h5/object_paths.hpp"
#include "h5/open_checked.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <stdexcept>

namespace attnbatch::io {
namespace {


[[noreturn]] void invalid(const std::string& message) { throw Error(exit_invalid_input, message); }
[[noreturn]] void usage(const std::string& message) { throw Error(exit_usage, message); }

// A dataset we have opened, with what the messages need to name it.
struct Data : detail::DatasetFacts {
    Dataset dataset;
};

// `role` is what the option names ("the embeddings"), `shape` its expected shape.
Data open_data(const File& file, const std::string& path, const std::string& option, const std::string& role,
               const std::string& shape) {
    Dataset dataset = detail::open_input_dataset(file, path, option, role + " " + shape);
    detail::DatasetFacts facts = detail::facts_of(dataset, option, role);
    return Data{std::move(facts), std::move(dataset)};
}

// `half_width`: float16 and bfloat16 are accepted too.
DataType float_type(const Data& data, bool half_width = false) {
    DataType type = DataType::float32;
    detail::raise_if(detail::float_type_rule(data, half_width, type));
    return type;
}

void expect_rank(const Data& data, std::size_t rank, const std::string& expected) {
    detail::raise_if(detail::rank_rule(data, rank, expected));
}

void expect_extents(const Data& data, const std::vector<std::string>& names) {
    detail::raise_if(detail::extents_rule(data, names));
}

std::int64_t extent(const Data& data, std::size_t axis) { return static_cast<std::int64_t>(data.dims[axis]); }

void expect_same(const Data& data, std::size_t axis, const Data& reference, std::size_t reference_axis,
                 const std::string& name, const std::string& why) {
    if (data.dims[axis] == reference.dims[reference_axis]) return;
    invalid(data.at() + " has " + name + " = " + std::to_string(data.dims[axis]) + " (shape " +
            shape_text(data.dims) + ") but " + reference.path + " has " + name + " = " +
            std::to_string(reference.dims[reference_axis]) + "; expected equal " + why);
}

void expect_heads_divide(std::int64_t heads, std::int64_t width, const std::string& what, const std::string& of) {
    detail::raise_if(detail::heads_divide_rule(heads, width, what, of));
}

// /lengths: integer [N].
void check_lengths_shape(const Data& lengths, std::int64_t n) {
    if (lengths.type.type_class != TypeClass::integer) {
        invalid(lengths.at() + " has dtype " + lengths.type_text + ", expected an integer type; hint: " + lengths.option +
                " names the valid-token count of each sequence");
    }
    if (lengths.dims.size() != 1 || static_cast<std::int64_t>(lengths.dims[0]) != n) {
        invalid(lengths.at() + " has shape " + shape_text(lengths.dims) + ", expected [N] = [" + std::to_string(n) +
                "], one count per sequence; hint: " + lengths.option + " names the valid-token counts");
    }
}

// 0 <= length <= L, scanned in bounded memory.
void check_lengths_values(const Data& lengths, std::int64_t len, const InputOptions& options) {
    const auto check = [&](const Slab& block, const void* data, std::size_t count) {
        const auto* values = static_cast<const std::int64_t*>(data);
        for (std::size_t i = 0; i < count; ++i) {
            if (values[i] >= 0 && values[i] <= len) continue;
            const std::string where = lengths.file + ": " + lengths.path + "[" + std::to_string(block.offset[0] + i) +
                                      "] = " + std::to_string(values[i]);
            if (values[i] < 0) invalid(where + " is negative (expected 0 <= length <= L = " + std::to_string(len) + ")");
            invalid(where + " exceeds L = " + std::to_string(len) + " (expected 0 <= length <= L)");
        }
        return true;
    };
    scan_blocks(lengths.dataset, options.scan_bytes, MemType::i64, check);
}

int requested_heads(const InputOptions& options) {
    if (options.heads < 0) usage("--heads " + std::to_string(options.heads) + " is negative; expected H >= 1");
    return options.heads;
}

int requested_kv_heads(const InputOptions& options) {
    if (options.kv_heads < 0) usage("--kv-heads " + std::to_string(options.kv_heads) + " is negative; expected G >= 1");
    return options.kv_heads;
}

void expect_kv_heads_divide(std::int64_t kv_heads, std::int64_t heads, const std::string& source) {
    detail::raise_if(detail::kv_heads_divide_rule(kv_heads, heads, source));
}

// The packed layout (input_spec.hpp): /offsets int64 [N+1] rising from 0 to T. Sets n, tokens and
// len (the longest sequence, at least 1).
void describe_offsets(const File& file, const Data& data, InputSpec& spec, std::size_t scan_bytes) {
    const std::string path = dataset::offsets;
    if (object_kind(file, path) == ObjectKind::missing) {
        invalid(data.at() + " has shape " + shape_text(data.dims) + ", the packed layout [T, ...], but the file has no " +
                path + "; expected " + path + " int64 [N+1] (sequence n is rows offsets[n]..offsets[n+1]); hint: give "
                "[N, L, ...] data for the padded layout");
    }
    Data offsets = open_data(file, path, "--dataset", "the sequence offsets", "int64 [N+1]");
    if (offsets.type.type_class != TypeClass::integer) {
        invalid(offsets.at() + " has dtype " + offsets.type_text + ", expected int64 [N+1]: where each "
                "sequence starts in " + data.path);
    }
    if (offsets.dims.size() != 1 || offsets.dims[0] < 2) {
        invalid(offsets.at() + " has shape " + shape_text(offsets.dims) + ", expected [N+1] with N >= 1 (sequence n is "
                "rows offsets[n]..offsets[n+1] of " + data.path + ")");
    }
    spec.packed = true;
    spec.offsets = path;
    spec.n = static_cast<std::int64_t>(offsets.dims[0]) - 1;
    spec.tokens = static_cast<std::int64_t>(data.dims[0]);
    std::int64_t previous = 0, longest = 0;
    const auto check = [&](const Slab& block, const void* values_data, std::size_t count) {
        const auto* values = static_cast<const std::int64_t*>(values_data);
        for (std::size_t i = 0; i < count; ++i) {
            const std::uint64_t index = block.offset[0] + i;
            const std::int64_t value = values[i];
            const std::string where = offsets.file + ": " + path + "[" + std::to_string(index) + "] = " + std::to_string(value);
            if (index == 0 && value != 0) invalid(where + ", expected 0 (the first sequence starts at row 0)");
            if (value < previous) {
                invalid(where + " is below " + path + "[" + std::to_string(index - 1) + "] = " + std::to_string(previous) +
                        ", expected offsets that never decrease");
            }
            if (value - previous > INT_MAX) {
                invalid(where + ": sequence " + std::to_string(index - 1) + " has " + std::to_string(value - previous) +
                        " tokens, expected at most " + std::to_string(INT_MAX));
            }
            longest = std::max(longest, value - previous);
            previous = value;
        }
        return true;
    };
    scan_blocks(offsets.dataset, scan_bytes, MemType::i64, check);
    if (previous != spec.tokens) {
        invalid(offsets.file + ": " + path + "[" + std::to_string(spec.n) + "] = " + std::to_string(previous) + ", expected T = " +
                std::to_string(spec.tokens) + ", the rows of " + data.path + " (the last sequence ends with the data)");
    }
    spec.len = std::max<std::int64_t>(longest, 1);
}

// Packed embeddings [T, d] with /offsets.
void describe_packed_embeddings(const File& file, const InputOptions& options, const Data& x, InputSpec& spec) {
    expect_extents(x, {"T", "d"});
    spec.d = extent(x, 1);
    spec.heads = requested_heads(options) == 0 ? 1 : options.heads;
    if (options.weights_path.empty()) {
        expect_heads_divide(spec.heads, spec.d, "d", x.file + ":" + x.path);
        spec.d_k = spec.d_v = spec.d / spec.heads;
    }
    describe_offsets(file, x, spec, options.scan_bytes);
}

// Packed Q, K, V [T, H*d_k], [T, H*d_k], [T, H*d_v] with /offsets.
void describe_packed_qkv(const File& file, const InputOptions& options, const Data& q, const Data& k, const Data& v,
                         InputSpec& spec) {
    expect_rank(k, 2, "[T, H*d_k] like --query");
    expect_rank(v, 2, "[T, H*d_v] like --query");
    for (const Data* data : {&q, &k, &v}) expect_extents(*data, {"T", "H*d"});
    const std::string shared = "for --query, --key and --value";
    expect_same(k, 0, q, 0, "T", shared);
    expect_same(v, 0, q, 0, "T", shared);
    expect_same(k, 1, q, 1, "H*d_k", "(queries and keys share d_k)");
    spec.layout = QkvLayout::packed;
    spec.heads = requested_heads(options) == 0 ? 1 : options.heads;
    expect_heads_divide(spec.heads, extent(q, 1), "the last axis H*d_k", q.file + ":" + q.path);
    expect_heads_divide(spec.heads, extent(v, 1), "the last axis H*d_v", v.file + ":" + v.path);
    spec.d_k = extent(q, 1) / spec.heads;
    spec.d_v = extent(v, 1) / spec.heads;
    describe_offsets(file, q, spec, options.scan_bytes);
}

// A /lengths beside packed data must say what /offsets says.
void check_packed_lengths(const File& file, const Data& lengths, const InputSpec& spec, std::size_t scan_bytes) {
    const Dataset offsets = Dataset::open(file, spec.offsets);
    std::vector<std::int64_t> bounds;
    const auto check = [&](const Slab& block, const void* data, std::size_t count) {
        const auto* values = static_cast<const std::int64_t*>(data);
        bounds.resize(count + 1);
        read_rows(offsets, block.offset[0], count + 1, bounds.data(), bounds.size());
        for (std::size_t i = 0; i < count; ++i) {
            if (values[i] == bounds[i + 1] - bounds[i]) continue;
            const std::uint64_t n = block.offset[0] + i;
            invalid(lengths.file + ": " + lengths.path + "[" + std::to_string(n) + "] = " + std::to_string(values[i]) +
                    " but " + spec.offsets + " gives sequence " + std::to_string(n) + " rows [" + std::to_string(bounds[i]) +
                    ", " + std::to_string(bounds[i + 1]) + "), " + std::to_string(bounds[i + 1] - bounds[i]) +
                    " tokens; expected equal (in the packed layout a sequence's length is its rows); hint: drop " +
                    lengths.path + " or correct it");
        }
        return true;
    };
    scan_blocks(lengths.dataset, scan_bytes, MemType::i64, check);
}

// Without --dataset, a file with no /embeddings but /tokens and /offsets is packed.
bool tokens_instead(const File& file, const std::string& path) {
    return path == dataset::embeddings && object_kind(file, path) == ObjectKind::missing &&
           object_kind(file, dataset::tokens) == ObjectKind::dataset &&
           object_kind(file, dataset::offsets) == ObjectKind::dataset;
}

void describe_embeddings(const File& file, const InputOptions& options, InputSpec& spec) {
    spec.mode = InputMode::embeddings;
    spec.dataset = detail::absolute_object_path(options.dataset.empty() ? dataset::embeddings : options.dataset);
    if (tokens_instead(file, spec.dataset)) spec.dataset = dataset::tokens;
    Data x = open_data(file, spec.dataset, "--dataset", "the embeddings", "[N, L, d]");
    spec.dtype = float_type(x, true);
    if (x.dims.size() == 2 && object_kind(file, dataset::offsets) != ObjectKind::missing) {
        return describe_packed_embeddings(file, options, x, spec);
    }
    if (x.dims.size() == 2) x.role += " (a [T, d] dataset is the packed layout and needs /offsets int64 [N+1])";
    expect_rank(x, 3, "[N, L, d]");
    expect_extents(x, {"N", "L", "d"});
    spec.n = extent(x, 0);
    spec.len = extent(x, 1);
    spec.d = extent(x, 2);
    spec.heads = requested_heads(options) == 0 ? 1 : options.heads;
    if (options.weights_path.empty()) {
        expect_heads_divide(spec.heads, spec.d, "d", x.file + ":" + x.path);
        spec.d_k = spec.d_v = spec.d / spec.heads;
        if (requested_kv_heads(options) != 0 && options.kv_heads != spec.heads) {
            usage("--kv-heads " + std::to_string(options.kv_heads) + " needs separate keys and values, but without --weights "
                  "Q = K = V = the embeddings, split into H = " + std::to_string(spec.heads) + " heads; hint: give --weights "
                  "(w_k, w_v with G*d_k, G*d_v columns) or --query/--key/--value, or drop --kv-heads");
        }
        spec.kv_heads = spec.heads;
    }
}

void describe_qkv(const File& file, const InputOptions& options, InputSpec& spec) {
    spec.mode = InputMode::qkv;
    spec.query = detail::absolute_object_path(options.query);
    spec.key = detail::absolute_object_path(options.key);
    spec.value = detail::absolute_object_path(options.value);
    Data q = open_data(file, spec.query, "--query", "the queries", "[N, L, H*d_k] or [N, H, L, d_k]");
    Data k = open_data(file, spec.key, "--key", "the keys", "[N, L, H*d_k] or [N, H, L, d_k]");
    Data v = open_data(file, spec.value, "--value", "the values", "[N, L, H*d_v] or [N, H, L, d_v]");
    spec.dtype = detail::widest(detail::widest(float_type(q, true), float_type(k, true)), float_type(v, true));

    const std::size_t rank = q.dims.size();
    const bool offsets = object_kind(file, dataset::offsets) != ObjectKind::missing;
    if (rank == 2 && offsets) return describe_packed_qkv(file, options, q, k, v, spec);
    if (rank != 3 && rank != 4) {
        invalid(q.at() + " has shape " + shape_text(q.dims) + " (rank " + std::to_string(rank) +
                "), expected [N, L, H*d_k] (rank 3) or [N, H, L, d_k] (rank 4); hint: --query names the queries" +
                (rank == 2 ? " ([T, H*d_k] is the packed layout and needs /offsets int64 [N+1])" : ""));
    }
    const bool packed = rank == 3;
    spec.layout = packed ? QkvLayout::packed : QkvLayout::split;
    const std::string q_shape = packed ? "[N, L, H*d_k]" : "[N, H, L, d_k]";
    expect_rank(k, rank, packed ? "[N, L, H*d_k] like --query" : "[N, H, L, d_k] like --query");
    expect_rank(v, rank, packed ? "[N, L, H*d_v] like --query" : "[N, H, L, d_v] like --query");
    const std::vector<std::string> names =
        packed ? std::vector<std::string>{"N", "L", "H*d"} : std::vector<std::string>{"N", "H", "L", "d"};
    for (const Data* data : {&q, &k, &v}) expect_extents(*data, names);

    const std::string shared = "for --query, --key and --value";
    const std::size_t l_axis = packed ? 1 : 2;
    const std::size_t d_axis = packed ? 2 : 3;
    expect_same(k, 0, q, 0, "N", shared);
    expect_same(v, 0, q, 0, "N", shared);
    expect_same(k, l_axis, q, l_axis, "L", "(self-attention: one L for queries and keys)");
    expect_same(v, l_axis, k, l_axis, "L", "(one value per key)");
    if (!packed) expect_same(k, d_axis, q, d_axis, "d_k", "(queries and keys share d_k)");
    spec.n = extent(q, 0);
    spec.len = extent(q, l_axis);
    const int kv_given = requested_kv_heads(options);
    if (packed) {
        spec.heads = requested_heads(options) == 0 ? 1 : options.heads;
        expect_heads_divide(spec.heads, extent(q, 2), "the last axis H*d_k", q.file + ":" + q.path);
        spec.d_k = extent(q, 2) / spec.heads;
        if (kv_given != 0) {
            expect_kv_heads_divide(kv_given, spec.heads, "given");
            spec.kv_heads = kv_given;
            if (extent(k, 2) != spec.kv_heads * spec.d_k) {
                invalid(k.at() + " has shape " + shape_text(k.dims) + ", expected [N, L, G*d_k] with G*d_k = " +
                        std::to_string(spec.kv_heads) + "*" + std::to_string(spec.d_k) + " = " +
                        std::to_string(spec.kv_heads * spec.d_k) + " (--kv-heads " + std::to_string(spec.kv_heads) +
                        ", d_k from " + q.path + "); hint: check --heads and --kv-heads");
            }
        } else {
            spec.kv_heads = detail::kv_heads_from_widths(spec.heads, spec.d_k, extent(k, 2));
            if (spec.kv_heads == 0) {
                invalid(k.at() + " has H*d_k = " + std::to_string(extent(k, 2)) + " (shape " + shape_text(k.dims) + ") but " +
                        q.path + " has H*d_k = " + std::to_string(extent(q, 2)) + "; expected equal (queries and keys share "
                        "d_k), or G*d_k for G K/V heads dividing H = " + std::to_string(spec.heads) + " (d_k = " +
                        std::to_string(spec.d_k) + "); hint: check --heads and --kv-heads");
            }
        }
        if (extent(v, 2) % spec.kv_heads != 0) {
            invalid(v.at() + " has shape " + shape_text(v.dims) + ": its last axis G*d_v = " + std::to_string(extent(v, 2)) +
                    " is not a multiple of G = " + std::to_string(spec.kv_heads) + " K/V heads (the keys' count)");
        }
        spec.d_v = extent(v, 2) / spec.kv_heads;
    } else {
        spec.heads = extent(q, 1);
        if (requested_heads(options) != 0 && options.heads != spec.heads) {
            usage("--heads " + std::to_string(options.heads) + " disagrees with " + q.file + ":" + q.path +
                  ", shape " + shape_text(q.dims) + " " + q_shape + " with H = " + std::to_string(spec.heads) +
                  "; hint: omit --heads for [N, H, L, d] inputs");
        }
        spec.kv_heads = extent(k, 1);
        if (kv_given != 0 && kv_given != spec.kv_heads) {
            usage("--kv-heads " + std::to_string(kv_given) + " disagrees with " + k.file + ":" + k.path + ", shape " +
                  shape_text(k.dims) + " [N, G, L, d_k] with G = " + std::to_string(spec.kv_heads) +
                  "; hint: omit --kv-heads for [N, G, L, d] inputs");
        }
        if (spec.heads % spec.kv_heads != 0) {
            invalid(k.at() + " has H = " + std::to_string(spec.kv_heads) + " (shape " + shape_text(k.dims) + ") but " + q.path +
                    " has H = " + std::to_string(spec.heads) + "; expected equal " + shared +
                    ", or G K/V heads dividing H (grouped-query attention)");
        }
        if (spec.kv_heads == spec.heads) expect_same(v, 1, q, 1, "H", shared);
        else expect_same(v, 1, k, 1, "G", "(one value head per key head)");
        spec.d_k = extent(q, 3);
        spec.d_v = extent(v, 3);
    }
}

void check_option_combinations(const InputOptions& options) {
    if (options.input_path.empty()) usage("--input is required; hint: --input names the HDF5 file to read");
    const int given = !options.query.empty() + !options.key.empty() + !options.value.empty();
    if (given != 0 && given != 3) {
        std::string which;
        if (!options.query.empty()) which += " --query";
        if (!options.key.empty()) which += " --key";
        if (!options.value.empty()) which += " --value";
        usage("--query, --key and --value go together, but only" + which +
              " was given; hint: give all three, or none to use --dataset");
    }
    if (given == 3 && !options.dataset.empty()) {
        usage("--dataset and --query/--key/--value exclude each other; hint: give either the embeddings or Q, K and V");
    }
    if (given == 3 && !options.weights_path.empty()) {
        usage("--weights projects the embeddings of --dataset and cannot apply to --query/--key/--value; hint: "
              "drop --weights, or give --dataset");
    }
}

// --weights: the projections' shapes against d, and the heads they give.
void describe_projections(const InputOptions& options, InputSpec& spec) {
    if (options.weights_path.empty()) return;
    WeightsRequest request;
    request.heads = options.heads;
    request.kv_heads = options.kv_heads;
    request.d = spec.d;
    request.d_source = spec.npy() ? spec.path : spec.path + ":" + spec.dataset;
    const DescribedWeights described = describe_weights(options.weights_path, request);
    spec.weights = described.spec;
    spec.heads = described.heads;
    spec.kv_heads = described.kv_heads;
    spec.d_k = spec.weights->qk_width / spec.heads;
    spec.d_v = spec.weights->v_width / spec.kv_heads;
}

// An HDF5 input: the data datasets, the lengths and the offsets of the packed layout.
void describe_hdf5_input(const InputOptions& options, InputSpec& spec) {
    const File file = detail::open_input_file(options.input_path, "--input");
    if (options.query.empty()) {
        describe_embeddings(file, options, spec);
    } else {
        describe_qkv(file, options, spec);
    }

    // Shapes and types of everything first, then the scans that read whole datasets.
    std::optional<Data> lengths;
    // "none" turns lengths off even when /lengths exists (a dataset of that name is "/none").
    const bool no_lengths = options.lengths == "none";
    const bool explicit_lengths = !options.lengths.empty() && !no_lengths;
    const std::string lengths_path =
        detail::absolute_object_path(explicit_lengths ? options.lengths : dataset::lengths);
    if (!no_lengths && (explicit_lengths || object_kind(file, lengths_path) != ObjectKind::missing)) {
        lengths = open_data(file, lengths_path, "--lengths", "the valid-token counts", "[N]");
        check_lengths_shape(*lengths, spec.n);
        spec.lengths = lengths_path;
    }
    describe_projections(options, spec);
    if (lengths) check_lengths_values(*lengths, spec.len, options);
    if (lengths && spec.packed) {
        check_packed_lengths(file, *lengths, spec, options.scan_bytes);
        spec.lengths.clear();  // the offsets say it all
    }
}

}  // namespace

void select_sequences(InputSpec& spec, std::int64_t first, std::int64_t last) {
    if (first < 0 || last <= first || last > spec.n) {
        throw std::invalid_argument("select_sequences: [" + std::to_string(first) + ", " + std::to_string(last) +
                                    ") is not within [0, " + std::to_string(spec.n) + ")");
    }
    spec.first_sequence += first;
    spec.n = last - first;
}


OutputLayout output_layout_for(const InputSpec& spec) {
    OutputLayout layout;
    layout.n = spec.n;
    layout.len = spec.len;
    layout.heads = spec.heads;
    layout.d_out = spec.d_out();
    return layout;
}

std::int64_t InputSpec::d_out() const {
    if (weights && weights->has_w_o) return weights->d_out;
    return heads * d_v;
}

InputSpec describe_input(const InputOptions& options) {
    check_option_combinations(options);
    InputSpec spec;
    spec.path = options.input_path;
    try {
        if (is_npy_input(options.input_path)) {
            describe_npy_input(options, spec);
            describe_projections(options, spec);
        } else {
            describe_hdf5_input(options, spec);
        }
    } catch (const H5Error& error) {
        detail::rethrow_read_failure(error);
    }
    // Shapes and types of everything first, then the scan that reads whole datasets.
    if (options.check_finite) {
        ValueScanner scanner(spec, options.scan_bytes);
        scanner.scan_sequences(0, spec.n);
        scanner.scan_weights();
    }
    return spec;
}

}  // namespace attnbatch::io
