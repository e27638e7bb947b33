// The rules the datasets of an input and of a projection-weights file are held to, and the
// head-count arithmetic both share. Each rule returns what is wrong, one line naming file,
// dataset, found and expected, with the exit code it ends a run with, rather than throwing:
// `run` stops at the first (raise_if), `inspect` lists them all.
#pragma once

#include "attnbatch/io/h5/dims.hpp"
#include "attnbatch/io/h5/type_info.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnbatch::io {

class Dataset;  // dataset.hpp

namespace detail {

struct RuleBreak {
    int exit_code = 0;
    std::string message;
};

// Throws the broken rule as an Error with its exit code.
[[noreturn]] void raise(const RuleBreak& broken);
inline void raise_if(const std::optional<RuleBreak>& broken) {
    if (broken) raise(*broken);
}

// A dataset as the rules see it: where it is, how the option naming it is described in
// hints, its type and its shape.
struct DatasetFacts {
    std::string file;    // "in.h5"
    std::string path;    // "/embeddings"
    std::string option;  // "--dataset"; empty when no option names it (inspect)
    std::string role;    // "the embeddings": what `option` names
    TypeInfo type;
    std::string type_text;  // type.name(), and for the classes it calls "other" what they are
    Dims dims;
    std::string at() const { return file + ": dataset " + path; }
};

// The facts of an open dataset; type_text looks into compound and enum types, so that a user
// sees why data is refused (numpy complex and bool arrays reach HDF5 as those).
DatasetFacts facts_of(const Dataset& dataset, const std::string& option, const std::string& role);

// float32 or float64 (and with `half_width` float16 or bfloat16, for data; projection weights
// need 32 or 64 bits); sets `type`.
std::optional<RuleBreak> float_type_rule(const DatasetFacts& data, bool half_width, DataType& type);
// `rank` axes; `expected` is the shape in words ("[N, L, d]").
std::optional<RuleBreak> rank_rule(const DatasetFacts& data, std::size_t rank, const std::string& expected);
// Every axis non-empty and at most INT_MAX (the kernels' int sizes), and at most 2^60
// elements in all (the size in bytes fits 64 bits); `names` name the axes in messages.
std::optional<RuleBreak> extents_rule(const DatasetFacts& data, const std::vector<std::string>& names);

// "choose --heads among the divisors of 12: 1 2 3 4 6 12".
std::string divisors_hint(std::int64_t value);
// H divides `width`; `what` names the axis ("d", "the columns H*d_k"), `of` the dataset
// ("in.h5:/w_q"), `stated_by` where H came from when not from --heads ("attribute heads of w.h5").
std::optional<RuleBreak> heads_divide_rule(std::int64_t heads, std::int64_t width, const std::string& what,
                                           const std::string& of, const std::string& stated_by = "");
// G divides H: query head h reads K/V head h / (H / G). `source` says where G came from.
std::optional<RuleBreak> kv_heads_divide_rule(std::int64_t kv_heads, std::int64_t heads, const std::string& source);
// G from the key width when it is not given: keys as wide as the queries are one K/V head per
// query head; narrower ones hold fewer heads of the same d_k. 0 when no G fits.
std::int64_t kv_heads_from_widths(std::int64_t heads, std::int64_t d_k, std::int64_t key_width);

// The type that holds both (float16 with bfloat16: float32, as neither holds the other).
DataType widest(DataType a, DataType b);

}  // namespace detail
}  // namespace attnbatch::io
