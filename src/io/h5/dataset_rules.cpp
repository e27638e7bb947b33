// The dataset rules shared by the input and the weights rules.
#include "h5/dataset_rules.hpp"

#include "attnbatch/error.hpp"
#include "attnbatch/io/h5/dataset.hpp"

#include <hdf5.h>

#include <climits>
#include <cstdio>

namespace attnbatch::io::detail {
namespace {

RuleBreak invalid(std::string message) { return RuleBreak{exit_invalid_input, std::move(message)}; }
RuleBreak usage(std::string message) { return RuleBreak{exit_usage, std::move(message)}; }

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

// At most 2^60 elements in a dataset: its size in bytes, read as float64, then fits 64 bits.
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 60;

}  // namespace

void raise(const RuleBreak& broken) { throw Error(broken.exit_code, broken.message); }

DatasetFacts facts_of(const Dataset& dataset, const std::string& option, const std::string& role) {
    DatasetFacts facts;
    facts.file = dataset.where().file;
    facts.path = dataset.path();
    facts.option = option;
    facts.role = role;
    facts.type = dataset.type_info();
    facts.type_text = type_text(dataset, facts.type);
    facts.dims = dataset.dims();
    return facts;
}

std::optional<RuleBreak> float_type_rule(const DatasetFacts& data, bool half_width, DataType& type) {
    if (data.type.type_class == TypeClass::floating && data.type.size == 4) {
        type = DataType::float32;
        return std::nullopt;
    }
    if (data.type.type_class == TypeClass::floating && data.type.size == 8) {
        type = DataType::float64;
        return std::nullopt;
    }
    if (half_width && data.type.half_width_bits()) {
        type = data.type.half_width_bits() == MemType::f16_bits ? DataType::float16 : DataType::bfloat16;
        return std::nullopt;
    }
    const std::string hint = data.type.type_class == TypeClass::floating
                                 ? "convert it, e.g. with numpy .astype('float32')"
                                 : data.option + " names real-valued data";
    return invalid(data.at() + " has dtype " + data.type_text + ", expected float32 or float64" +
                   (half_width ? " (or float16, or bfloat16: a 2-byte float with 8 exponent bits)" : "") + "; hint: " + hint);
}

std::optional<RuleBreak> rank_rule(const DatasetFacts& data, std::size_t rank, const std::string& expected) {
    if (data.dims.size() == rank) return std::nullopt;
    return invalid(data.at() + " has shape " + shape_text(data.dims) + " (rank " + std::to_string(data.dims.size()) +
                   "), expected " + expected + " (rank " + std::to_string(rank) + "); hint: " + data.option + " names " +
                   data.role);
}

namespace {

// "1" and what an axis named `name` counts: the padded layout's N sequences, the packed layout's
// T tokens of all sequences (T = 0: every sequence is empty); other axes count plain elements.
std::string one_of(const std::string& name) {
    if (name == "N") return "1 sequence";
    if (name == "T") {
        return "1 token (every sequence is empty, and a packed output needs at least one row; the padded layout, "
               "/embeddings with /lengths, runs empty sequences)";
    }
    return "1";
}

}  // namespace

std::optional<RuleBreak> extents_rule(const DatasetFacts& data, const std::vector<std::string>& names) {
    std::uint64_t elements = 1;
    for (std::size_t axis = 0; axis < data.dims.size(); ++axis) {
        const std::string& name = axis < names.size() ? names[axis] : std::to_string(axis);
        if (data.dims[axis] == 0) {
            return invalid(data.at() + " has shape " + shape_text(data.dims) + ": " + name + " = 0, expected at least " +
                           one_of(name));
        }
        if (data.dims[axis] > static_cast<std::uint64_t>(INT_MAX)) {
            return invalid(data.at() + " has " + name + " = " + std::to_string(data.dims[axis]) + ", expected at most " +
                           std::to_string(INT_MAX));
        }
        if (__builtin_mul_overflow(elements, data.dims[axis], &elements) || elements > kMaxElements) {
            return invalid(data.at() + " has shape " + shape_text(data.dims) + ", more than 2^60 elements; expected a "
                           "dataset whose size in bytes fits 64 bits");
        }
    }
    return std::nullopt;
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

std::optional<RuleBreak> heads_divide_rule(std::int64_t heads, std::int64_t width, const std::string& what,
                                           const std::string& of, const std::string& stated_by) {
    if (width % heads == 0) return std::nullopt;
    const std::string who = stated_by.empty() ? "--heads " + std::to_string(heads)
                                              : "H = " + std::to_string(heads) + " (" + stated_by + ")";
    return usage(who + " does not divide " + what + " = " + std::to_string(width) + " of " + of + "; hint: " +
                 divisors_hint(width));
}

std::optional<RuleBreak> kv_heads_divide_rule(std::int64_t kv_heads, std::int64_t heads, const std::string& source) {
    if (kv_heads >= 1 && kv_heads <= heads && heads % kv_heads == 0) return std::nullopt;
    std::string hint = divisors_hint(heads);
    hint.replace(hint.find("--heads"), 7, "--kv-heads");
    return usage("--kv-heads " + std::to_string(kv_heads) + " (" + source + ") does not divide --heads " +
                 std::to_string(heads) + "; expected G dividing H (query head h reads K/V head h / (H/G)); hint: " + hint);
}

std::int64_t kv_heads_from_widths(std::int64_t heads, std::int64_t d_k, std::int64_t key_width) {
    if (d_k <= 0 || key_width % d_k != 0) return 0;
    const std::int64_t groups = key_width / d_k;
    return groups >= 1 && groups <= heads && heads % groups == 0 ? groups : 0;
}

DataType widest(DataType a, DataType b) {
    if (a == DataType::float64 || b == DataType::float64) return DataType::float64;
    return a == b ? a : DataType::float32;  // float16 with bfloat16: neither holds the other
}

}  // namespace attnbatch::io::detail
