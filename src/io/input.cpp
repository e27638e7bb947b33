// describe_input: every rule the input must satisfy, checked before any compute. Each
// failure is one line: file, dataset or option, expected versus found, and a hint.
#include "attnbatch/io/input.hpp"

#include "attnbatch/io/h5_error.hpp"
#include "attnbatch/io/schema_names.hpp"
#include "input_files.hpp"
#include "paths.hpp"

#include <cfloat>
#include <limits>
#include <climits>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace attnbatch::io {
namespace {


[[noreturn]] void invalid(const std::string& message) { throw Error(exit_invalid_input, message); }
[[noreturn]] void usage(const std::string& message) { throw Error(exit_usage, message); }

// A dataset's type for messages: TypeInfo::name() for numbers and strings, and for the
// classes it calls "other" what they are, so that a user sees why the data is refused (numpy
// complex and bool arrays reach HDF5 as a compound and an enum).
std::string type_text(const Dataset& dataset, const TypeInfo& info) {
    if (info.type_class != TypeClass::other) return info.name();
    const std::string bytes = " (" + std::to_string(info.size) + (info.size == 1 ? " byte)" : " bytes)");
    const hid_t type = H5Dget_type(dataset.id());
    if (type < 0) return info.name();
    std::string text;
    switch (H5Tget_class(type)) {
        case H5T_COMPOUND: {
            const int members = H5Tget_nmembers(type);
            bool two_floats = members == 2;
            for (int i = 0; i < members && two_floats; ++i) two_floats = H5Tget_member_class(type, static_cast<unsigned>(i)) == H5T_FLOAT;
            text = "compound of " + std::to_string(members) + (members == 1 ? " field" : " fields") + bytes +
                   (two_floats ? ", i.e. complex numbers" : "");
            break;
        }
        case H5T_ENUM: {
            char name[8] = {};
            const bool boolean = H5Tget_nmembers(type) == 2 && H5Tget_member_name(type, 0) != nullptr;
            if (boolean) {
                char* first = H5Tget_member_name(type, 0);
                std::snprintf(name, sizeof name, "%s", first);
                H5free_memory(first);
            }
            text = std::string("enum") + bytes + (boolean && std::string(name) == "FALSE" ? ", i.e. booleans" : "");
            break;
        }
        case H5T_VLEN: text = "variable-length sequence"; break;
        case H5T_ARRAY: text = "array" + bytes; break;
        case H5T_OPAQUE: text = "opaque" + bytes; break;
        case H5T_BITFIELD: text = "bitfield" + bytes; break;
        case H5T_REFERENCE: text = "reference"; break;
        case H5T_TIME: text = "time" + bytes; break;
        default: text = info.name(); break;
    }
    H5Tclose(type);
    return text;
}

std::string number_text(double value) {
    std::ostringstream out;
    out << value;
    return out.str();
}

// A dataset we have opened, with what the messages need to name it.
struct Data {
    std::string file;
    std::string path;
    std::string option;
    std::string role;  // "the embeddings": what `option` names, for hints
    Dataset dataset;
    Dims dims;
    std::string at() const { return file + ": dataset " + path; }
};

// `role` is what the option names ("the embeddings"), `shape` its expected shape.
Data open_data(const File& file, const std::string& path, const std::string& option, const std::string& role,
               const std::string& shape) {
    Dataset dataset = detail::open_input_dataset(file, path, option, role + " " + shape);
    Dims dims = dataset.dims();
    return Data{file.path(), path, option, role, std::move(dataset), std::move(dims)};
}

// `half_width`: float16 and bfloat16 are accepted too (the data; projection weights need 32 or
// 64 bits).
DataType float_type(const Data& data, bool half_width = false) {
    const TypeInfo type = data.dataset.type_info();
    if (type.type_class == TypeClass::floating && type.size == 4) return DataType::float32;
    if (type.type_class == TypeClass::floating && type.size == 8) return DataType::float64;
    if (half_width && type.half_width_bits()) {
        return type.half_width_bits() == MemType::f16_bits ? DataType::float16 : DataType::bfloat16;
    }
    const std::string hint = type.type_class == TypeClass::floating
                                 ? "convert it, e.g. with numpy .astype('float32')"
                                 : data.option + " names real-valued data";
    invalid(data.at() + " has dtype " + type_text(data.dataset, type) + ", expected float32 or float64" +
            (half_width ? " (or float16, or bfloat16: a 2-byte float with 8 exponent bits)" : "") + "; hint: " + hint);
}

void expect_rank(const Data& data, std::size_t rank, const std::string& expected) {
    if (data.dims.size() == rank) return;
    invalid(data.at() + " has shape " + shape_text(data.dims) + " (rank " + std::to_string(data.dims.size()) +
            "), expected " + expected + " (rank " + std::to_string(rank) + "); hint: " + data.option + " names " +
            data.role);
}

// At most 2^60 elements in a dataset: its size in bytes, read as float64, then fits 64 bits.
constexpr hsize_t kMaxElements = hsize_t{1} << 60;

// Every axis non-empty and small enough for the kernels' int sizes, and the whole small enough
// to count in bytes; names the first bad axis.
void expect_extents(const Data& data, const std::vector<std::string>& names) {
    hsize_t elements = 1;
    for (std::size_t axis = 0; axis < data.dims.size(); ++axis) {
        const std::string& name = axis < names.size() ? names[axis] : std::to_string(axis);
        if (data.dims[axis] == 0) {
            invalid(data.at() + " has shape " + shape_text(data.dims) + ": " + name + " = 0, expected at least 1" +
                    (axis == 0 ? " sequence" : ""));
        }
        if (data.dims[axis] > static_cast<hsize_t>(INT_MAX)) {
            invalid(data.at() + " has " + name + " = " + std::to_string(data.dims[axis]) + ", expected at most " +
                    std::to_string(INT_MAX));
        }
        if (__builtin_mul_overflow(elements, data.dims[axis], &elements) || elements > kMaxElements) {
            invalid(data.at() + " has shape " + shape_text(data.dims) + ", more than 2^60 elements; expected a "
                    "dataset whose size in bytes fits 64 bits");
        }
    }
}

std::int64_t extent(const Data& data, std::size_t axis) { return static_cast<std::int64_t>(data.dims[axis]); }

void expect_same(const Data& data, std::size_t axis, const Data& reference, std::size_t reference_axis,
                 const std::string& name, const std::string& why) {
    if (data.dims[axis] == reference.dims[reference_axis]) return;
    invalid(data.at() + " has " + name + " = " + std::to_string(data.dims[axis]) + " (shape " +
            shape_text(data.dims) + ") but " + reference.path + " has " + name + " = " +
            std::to_string(reference.dims[reference_axis]) + "; expected equal " + why);
}

std::string divisors_hint(std::int64_t value) {
    std::string hint = "choose --heads among the divisors of " + std::to_string(value) + ":";
    int listed = 0;
    for (std::int64_t h = 1; h <= value && listed < 8; ++h) {
        if (value % h == 0) {
            hint += " " + std::to_string(h);
            ++listed;
        }
    }
    return hint + (listed == 8 ? " ..." : "");
}

// `what` names the axis ("d", "the last axis H*d_k"), `of` the dataset ("in.h5:/x").
void expect_heads_divide(std::int64_t heads, std::int64_t width, const std::string& what, const std::string& of) {
    if (width % heads == 0) return;
    usage("--heads " + std::to_string(heads) + " does not divide " + what + " = " + std::to_string(width) + " of " +
          of + "; hint: " + divisors_hint(width));
}

void expect_finite(const Data& data, std::size_t scan_bytes, std::uint64_t first, std::uint64_t last) {
    // Everything is computed in float32: a finite float64 beyond FLT_MAX would become inf.
    const std::optional<BadValue> bad =
        find_first_non_finite(data.dataset, scan_bytes, static_cast<double>(FLT_MAX), first, last);
    if (!bad) return;
    if (!std::isfinite(bad->value)) {
        invalid(data.at() + " has a non-finite value (" + number_text(bad->value) + ") at " + shape_text(bad->index) +
                ", expected finite values everywhere, padding included; hint: replace them, e.g. numpy.nan_to_num");
    }
    invalid(data.at() + " has the value " + number_text(bad->value) + " at " + shape_text(bad->index) +
            ", beyond float32's range (|x| <= 3.4e38) used for the compute; hint: rescale the data");
}

// /lengths: integer [N].
void check_lengths_shape(const Data& lengths, std::int64_t n) {
    const TypeInfo type = lengths.dataset.type_info();
    if (type.type_class != TypeClass::integer) {
        invalid(lengths.at() + " has dtype " + type_text(lengths.dataset, type) + ", expected an integer type; hint: " + lengths.option +
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

DataType widest(DataType a, DataType b) {
    if (a == DataType::float64 || b == DataType::float64) return DataType::float64;
    return a == b ? a : DataType::float32;  // float16 with bfloat16: neither holds the other
}

void describe_embeddings(const File& file, const InputOptions& options, InputSpec& spec) {
    spec.mode = InputMode::embeddings;
    spec.dataset = detail::absolute_object_path(options.dataset.empty() ? dataset::embeddings : options.dataset);
    Data x = open_data(file, spec.dataset, "--dataset", "the embeddings", "[N, L, d]");
    spec.dtype = float_type(x, true);
    expect_rank(x, 3, "[N, L, d]");
    expect_extents(x, {"N", "L", "d"});
    spec.n = extent(x, 0);
    spec.len = extent(x, 1);
    spec.d = extent(x, 2);
    spec.heads = requested_heads(options) == 0 ? 1 : options.heads;
    if (options.weights_path.empty()) {
        expect_heads_divide(spec.heads, spec.d, "d", x.file + ":" + x.path);
        spec.d_k = spec.d_v = spec.d / spec.heads;
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
    spec.dtype = widest(widest(float_type(q, true), float_type(k, true)), float_type(v, true));

    const std::size_t rank = q.dims.size();
    if (rank != 3 && rank != 4) {
        invalid(q.at() + " has shape " + shape_text(q.dims) + " (rank " + std::to_string(rank) +
                "), expected [N, L, H*d_k] (rank 3) or [N, H, L, d_k] (rank 4); hint: --query names the queries");
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
    expect_same(k, d_axis, q, d_axis, packed ? "H*d_k" : "d_k", "(queries and keys share d_k)");
    spec.n = extent(q, 0);
    spec.len = extent(q, l_axis);
    if (packed) {
        spec.heads = requested_heads(options) == 0 ? 1 : options.heads;
        expect_heads_divide(spec.heads, extent(q, 2), "the last axis H*d_k", q.file + ":" + q.path);
        expect_heads_divide(spec.heads, extent(v, 2), "the last axis H*d_v", v.file + ":" + v.path);
        spec.d_k = extent(q, 2) / spec.heads;
        spec.d_v = extent(v, 2) / spec.heads;
    } else {
        spec.heads = extent(q, 1);
        if (requested_heads(options) != 0 && options.heads != spec.heads) {
            usage("--heads " + std::to_string(options.heads) + " disagrees with " + q.file + ":" + q.path +
                  ", shape " + shape_text(q.dims) + " " + q_shape + " with H = " + std::to_string(spec.heads) +
                  "; hint: omit --heads for [N, H, L, d] inputs");
        }
        expect_same(k, 1, q, 1, "H", shared);
        expect_same(v, 1, q, 1, "H", shared);
        spec.d_k = extent(q, 3);
        spec.d_v = extent(v, 3);
    }
}

// Weights matrix or bias `path`: rank `rank`, float32/64, its type folded into `dtype`;
// nothing when it is optional and absent.
std::optional<Data> open_weight(const File& file, const std::string& path, bool required, std::size_t rank,
                                const std::string& expected, DataType& dtype) {
    if (!required && object_kind(file, path) == ObjectKind::missing) return std::nullopt;
    Data data = open_data(file, path, "--weights", "the projections file",
                          "with /w_q [d, H*d_k], /w_k [d, H*d_k], /w_v [d, H*d_v] and optional /w_o "
                          "[H*d_v, d_out], /b_q, /b_k, /b_v, /b_o");
    dtype = widest(dtype, float_type(data));
    expect_rank(data, rank, expected);
    expect_extents(data, rank == 2 ? std::vector<std::string>{"rows", "columns"} : std::vector<std::string>{"size"});
    return data;
}

void expect_shape(const Data& data, const Dims& expected, const std::string& why) {
    if (data.dims == expected) return;
    invalid(data.at() + " has shape " + shape_text(data.dims) + ", expected " + shape_text(expected) + " " + why);
}

WeightsSpec describe_weights(const InputOptions& options, const InputSpec& spec) {
    WeightsSpec weights;
    weights.path = options.weights_path;
    const File file = detail::open_input_file(options.weights_path, "--weights");
    DataType& dtype = weights.dtype;
    Data w_q = *open_weight(file, dataset::w_q, true, 2, "[d, H*d_k]", dtype);
    Data w_k = *open_weight(file, dataset::w_k, true, 2, "[d, H*d_k]", dtype);
    Data w_v = *open_weight(file, dataset::w_v, true, 2, "[d, H*d_v]", dtype);
    std::optional<Data> w_o = open_weight(file, dataset::w_o, false, 2, "[H*d_v, d_out]", dtype);
    std::optional<Data> b_q = open_weight(file, dataset::b_q, false, 1, "[H*d_k]", dtype);
    std::optional<Data> b_k = open_weight(file, dataset::b_k, false, 1, "[H*d_k]", dtype);
    std::optional<Data> b_v = open_weight(file, dataset::b_v, false, 1, "[H*d_v]", dtype);
    std::optional<Data> b_o = open_weight(file, dataset::b_o, false, 1, "[d_out]", dtype);

    const std::string embeddings = "from " + spec.path + ":" + spec.dataset;
    if (extent(w_q, 0) != spec.d) {
        invalid(w_q.at() + " has shape " + shape_text(w_q.dims) + ", expected [d, H*d_k] with d = " +
                std::to_string(spec.d) + " " + embeddings + "; hint: the projections must match the embeddings");
    }
    expect_shape(w_k, w_q.dims, "like /w_q (keys and queries share d_k)");
    if (extent(w_v, 0) != spec.d) {
        invalid(w_v.at() + " has shape " + shape_text(w_v.dims) + ", expected [d, H*d_v] with d = " +
                std::to_string(spec.d) + " " + embeddings + "; hint: the projections must match the embeddings");
    }
    weights.d_in = spec.d;
    weights.qk_width = extent(w_q, 1);
    weights.v_width = extent(w_v, 1);
    expect_heads_divide(spec.heads, weights.qk_width, "the columns H*d_k", w_q.file + ":" + dataset::w_q);
    expect_heads_divide(spec.heads, weights.v_width, "the columns H*d_v", w_v.file + ":" + dataset::w_v);
    if (w_o) {
        if (extent(*w_o, 0) != weights.v_width) {
            invalid(w_o->at() + " has shape " + shape_text(w_o->dims) + ", expected [H*d_v, d_out] with H*d_v = " +
                    std::to_string(weights.v_width) + " (the columns of /w_v)");
        }
        weights.has_w_o = true;
        weights.d_out = extent(*w_o, 1);
    }
    const auto qk = static_cast<hsize_t>(weights.qk_width);
    const auto vw = static_cast<hsize_t>(weights.v_width);
    if (b_q) expect_shape(*b_q, {qk}, "(the columns of /w_q)");
    if (b_k) expect_shape(*b_k, {qk}, "(the columns of /w_k)");
    if (b_v) expect_shape(*b_v, {vw}, "(the columns of /w_v)");
    if (b_o) {
        if (!w_o) invalid(b_o->at() + " is present without /w_o; expected /w_o [H*d_v, d_out] alongside it");
        expect_shape(*b_o, {static_cast<hsize_t>(weights.d_out)}, "(the columns of /w_o)");
    }
    weights.has_b_q = b_q.has_value();
    weights.has_b_k = b_k.has_value();
    weights.has_b_v = b_v.has_value();
    weights.has_b_o = b_o.has_value();
    return weights;
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

}  // namespace

const char* name_of(DataType type) {
    switch (type) {
        case DataType::float64: return "float64";
        case DataType::float16: return "float16";
        case DataType::bfloat16: return "bfloat16";
        case DataType::float32: break;
    }
    return "float32";
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
        const File file = detail::open_input_file(options.input_path, "--input");
        if (options.query.empty()) {
            describe_embeddings(file, options, spec);
        } else {
            describe_qkv(file, options, spec);
        }

        // Shapes and types of everything first, then the scans that read whole datasets.
        std::optional<Data> lengths;
        const bool explicit_lengths = !options.lengths.empty();
        const std::string lengths_path =
            detail::absolute_object_path(explicit_lengths ? options.lengths : dataset::lengths);
        if (explicit_lengths || object_kind(file, lengths_path) != ObjectKind::missing) {
            lengths = open_data(file, lengths_path, "--lengths", "the valid-token counts", "[N]");
            check_lengths_shape(*lengths, spec.n);
            spec.lengths = lengths_path;
        }
        if (!options.weights_path.empty()) {
            spec.weights = describe_weights(options, spec);
            spec.d_k = spec.weights->qk_width / spec.heads;
            spec.d_v = spec.weights->v_width / spec.heads;
        }
        if (lengths) check_lengths_values(*lengths, spec.len, options);
    } catch (const H5Error& error) {
        detail::rethrow_read_failure(error);
    }
    // Shapes and types of everything first, then the scan that reads whole datasets.
    if (options.check_finite) check_values(spec, ValueScan{0, spec.n, true, options.scan_bytes});
    return spec;
}

void check_values(const InputSpec& spec, const ValueScan& scan) {
    try {
        std::vector<Data> data;
        {
            const File file = detail::open_input_file(spec.path, "--input");
            if (spec.mode == InputMode::embeddings) {
                data.push_back(open_data(file, spec.dataset, "--dataset", "the embeddings", "[N, L, d]"));
            } else {
                data.push_back(open_data(file, spec.query, "--query", "the queries", "[N, L, H*d_k] or [N, H, L, d_k]"));
                data.push_back(open_data(file, spec.key, "--key", "the keys", "[N, L, H*d_k] or [N, H, L, d_k]"));
                data.push_back(open_data(file, spec.value, "--value", "the values", "[N, L, H*d_v] or [N, H, L, d_v]"));
            }
        }
        const auto first = static_cast<std::uint64_t>(std::max<std::int64_t>(0, scan.first));
        const auto last = static_cast<std::uint64_t>(std::max(scan.first, scan.last));
        for (const Data& d : data) expect_finite(d, scan.bytes, first, last);
        if (!scan.weights || !spec.weights) return;
        const WeightsSpec& w = *spec.weights;
        const File file = detail::open_input_file(w.path, "--weights");
        const std::pair<const char*, bool> weights[] = {{dataset::w_q, true},      {dataset::w_k, true},      {dataset::w_v, true},
                                                        {dataset::w_o, w.has_w_o}, {dataset::b_q, w.has_b_q}, {dataset::b_k, w.has_b_k},
                                                        {dataset::b_v, w.has_b_v}, {dataset::b_o, w.has_b_o}};
        for (const auto& [path, present] : weights) {
            if (!present) continue;
            const Data d = open_data(file, path, "--weights", "the projections file", "");
            expect_finite(d, scan.bytes, 0, std::numeric_limits<std::uint64_t>::max());
        }
    } catch (const H5Error& error) {
        detail::rethrow_read_failure(error);
    }
}

}  // namespace attnbatch::io
