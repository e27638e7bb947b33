// The projection-weights rules (weights_spec.hpp), applied to what a file holds: by `run` to
// the file itself, by `inspect` to its schema. Each broken rule is one line naming file,
// dataset, found and expected, in the order `run` meets them.
#include "attnbatch/io/models/weights_spec.hpp"

#include "attnbatch/error.hpp"
#include "attnbatch/io/h5/attribute.hpp"
#include "attnbatch/io/h5/dataset.hpp"
#include "attnbatch/io/h5/file.hpp"
#include "attnbatch/io/h5/file_schema.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "h5/dataset_rules.hpp"
#include "h5/open_checked.hpp"

#include <algorithm>
#include <optional>

namespace attnbatch::io {
namespace {

using detail::DatasetFacts;
using detail::RuleBreak;

// The datasets of the format, in the documented order, each with the shape it must have.
enum Slot { w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o, kSlots };
struct SlotRule {
    const char* path;
    bool required;
    std::size_t rank;
    const char* expected;
};
constexpr SlotRule kRules[kSlots] = {
    {dataset::w_q, true, 2, "[d, H*d_k]"},      {dataset::w_k, true, 2, "[d, G*d_k]"}, {dataset::w_v, true, 2, "[d, G*d_v]"},
    {dataset::w_o, false, 2, "[H*d_v, d_out]"}, {dataset::b_q, false, 1, "[H*d_k]"},   {dataset::b_k, false, 1, "[G*d_k]"},
    {dataset::b_v, false, 1, "[G*d_v]"},        {dataset::b_o, false, 1, "[d_out]"}};

// How hints name the file and what it holds.
constexpr const char* kOption = "--weights";
constexpr const char* kRole = "the projections file";
constexpr const char* kHolds = "the projections file with /w_q [d, H*d_k], /w_k [d, H*d_k], /w_v [d, H*d_v] and optional "
                               "/w_o [H*d_v, d_out], /b_q, /b_k, /b_v, /b_o";

// What a file holds, as far as the rules go.
struct WeightsFacts {
    std::string file;
    struct Entry {
        ObjectKind kind = ObjectKind::missing;
        std::optional<RuleBreak> unreadable;  // a dataset HDF5 cannot read (a filter it lacks)
        DatasetFacts facts;
    };
    Entry entries[kSlots];
    std::vector<std::string> root_datasets;  // named in the hint when a dataset is missing
    // The root attributes heads, kv_heads and rope_theta, as stored: judged by apply_rules so
    // that run (from the file) and inspect (from its schema) refuse the same ones.
    std::optional<AttributeValue> heads, kv_heads, rope_theta;
};

struct Findings {
    WeightsSpec spec;
    std::int64_t heads = 0, kv_heads = 0;  // 0: not known
    std::vector<std::string> present;
    std::vector<RuleBreak> problems;
};

RuleBreak invalid(std::string message) { return RuleBreak{exit_invalid_input, std::move(message)}; }

std::string text(std::int64_t value) { return std::to_string(value); }

// The option when given, else the file's count; both given and different: exit 2 naming both.
std::optional<RuleBreak> agreement_rule(int option_value, std::int64_t stated, const char* option, const char* name,
                                        const std::string& file) {
    if (option_value == 0 || stated == 0 || option_value == stated) return std::nullopt;
    return RuleBreak{exit_usage, std::string(option) + " " + text(option_value) + " contradicts " + file + ", whose attribute " +
                                     name + " = " + text(stated) + " says how its weights are cut into heads; hint: omit " +
                                     option + " to use the file's " + text(stated) + ", or fix the file's attribute"};
}

// The facts of the dataset of `slot`, or, when this HDF5 cannot decode it (a filter it lacks),
// the rule it breaks: run meets that when it reads the dataset, so inspect must too.
DatasetFacts open_entry(const File& file, int slot, std::optional<RuleBreak>& unreadable) {
    try {
        const Dataset dataset = detail::open_input_dataset(file, kRules[slot].path, kOption, kHolds);
        return detail::facts_of(dataset, kOption, kRole);
    } catch (const H5Error&) {
        throw;
    } catch (const Error& error) {
        unreadable = RuleBreak{error.exit_code(), error.what()};
        return DatasetFacts{};
    }
}

bool is_scalar(const AttributeValue& value, std::size_t count) { return count == 1 && element_count(value.shape) == 1; }

// A head count the file states: a positive scalar integer. Ignoring any other value would run
// with H = 1 and cut the weights into heads other than the model's.
std::optional<RuleBreak> stated_count_rule(const std::optional<AttributeValue>& value, const std::string& file,
                                           const char* what, std::int64_t& count) {
    count = 0;
    if (!value) return std::nullopt;
    const std::string expected = std::string("a positive scalar integer (") + what + ")";
    if (value->kind != AttributeValue::Kind::integer || !is_scalar(*value, value->integers.size())) {
        return invalid(attribute_type_message(file, "/", value->name, attribute_type_text(value->type, value->shape), expected) +
                       "; hint: fix or delete the attribute (h5py: del f.attrs[\"" + value->name + "\"])");
    }
    if (value->integers[0] < 1) {
        return invalid(file + ": " + attribute_label("/", value->name) + " = " + text(value->integers[0]) + ", expected " +
                       expected + "; hint: fix or delete the attribute (h5py: del f.attrs[\"" + value->name + "\"])");
    }
    count = value->integers[0];
    return std::nullopt;
}

std::optional<RuleBreak> rope_theta_rule(const std::optional<AttributeValue>& value, const std::string& file, double& theta) {
    theta = 0;
    if (!value) return std::nullopt;
    const bool integer = value->kind == AttributeValue::Kind::integer && is_scalar(*value, value->integers.size());
    const bool real = value->kind == AttributeValue::Kind::real && is_scalar(*value, value->reals.size());
    if (!integer && !real) {
        return invalid(attribute_type_message(file, "/", value->name, attribute_type_text(value->type, value->shape),
                                              "a scalar number (the base of the model's rotary embeddings)"));
    }
    theta = integer ? static_cast<double>(value->integers[0]) : value->reals[0];
    return std::nullopt;
}

// `heads_default_to_one`: run computes with H = 1 when neither the request nor the file says;
// inspect leaves H unknown then.
Findings apply_rules(const WeightsFacts& f, const WeightsRequest& request, bool heads_default_to_one) {
    Findings out;
    const auto broken = [&](std::optional<RuleBreak> rule) {
        if (rule) out.problems.push_back(std::move(*rule));
        return rule.has_value();
    };
    // The stated attributes first; a heads attribute refused leaves H unknown rather than 1, so
    // that no head rule below blames the datasets for it.
    std::int64_t stated_heads = 0, stated_kv_heads = 0;
    const bool heads_unknown = broken(stated_count_rule(f.heads, f.file, "the number of query heads", stated_heads));
    broken(stated_count_rule(f.kv_heads, f.file, "the number of key/value heads", stated_kv_heads));
    broken(rope_theta_rule(f.rope_theta, f.file, out.spec.file_rope_theta));
    out.spec.file_heads = stated_heads;
    out.spec.file_kv_heads = stated_kv_heads;
    const auto at = [&](Slot slot) { return f.entries[slot].facts.at(); };

    // Each dataset on its own: present, float32 or float64, its rank, its extents.
    bool usable[kSlots] = {};
    for (int slot = 0; slot < kSlots; ++slot) {
        const SlotRule& rule = kRules[slot];
        const WeightsFacts::Entry& entry = f.entries[slot];
        if (entry.kind == ObjectKind::missing && !rule.required) continue;
        if (entry.kind != ObjectKind::dataset) {
            broken(invalid(detail::not_a_dataset(f.file, rule.path, entry.kind, kOption, kHolds, f.root_datasets)));
            continue;
        }
        out.present.push_back(rule.path);
        if (entry.unreadable) {
            broken(entry.unreadable);
            continue;
        }
        DataType type = DataType::float32;
        if (broken(detail::float_type_rule(entry.facts, false, type))) continue;
        out.spec.dtype = detail::widest(out.spec.dtype, type);
        if (broken(detail::rank_rule(entry.facts, rule.rank, rule.expected))) continue;
        const std::vector<std::string> axes =
            rule.rank == 2 ? std::vector<std::string>{"rows", "columns"} : std::vector<std::string>{"size"};
        if (broken(detail::extents_rule(entry.facts, axes))) continue;
        usable[slot] = true;
    }
    if (!usable[w_q] || !usable[w_k] || !usable[w_v]) return out;  // nothing more can be said

    // The matrices read the same embeddings: d rows each.
    const Dims& q = f.entries[w_q].facts.dims;
    const Dims& k = f.entries[w_k].facts.dims;
    const Dims& v = f.entries[w_v].facts.dims;
    const std::int64_t qk = static_cast<std::int64_t>(q[1]), kw = static_cast<std::int64_t>(k[1]);
    const std::int64_t vw = static_cast<std::int64_t>(v[1]);
    const std::int64_t d = request.d > 0 ? request.d : static_cast<std::int64_t>(q[0]);
    if (request.d > 0) {
        const std::string from = " from " + request.d_source + "; hint: the projections must match the embeddings";
        if (static_cast<std::int64_t>(q[0]) != d) {
            broken(invalid(at(w_q) + " has shape " + shape_text(q) + ", expected [d, H*d_k] with d = " + text(d) + from));
        }
        for (const Slot slot : {w_k, w_v}) {
            if (static_cast<std::int64_t>(f.entries[slot].facts.dims[0]) == d) continue;
            broken(invalid(at(slot) + " has shape " + shape_text(f.entries[slot].facts.dims) + ", expected [d, " +
                           (slot == w_k ? "G*d_k" : "G*d_v") + "] with d = " + text(d) + from));
        }
    } else {
        for (const Slot slot : {w_k, w_v}) {
            if (f.entries[slot].facts.dims[0] == q[0]) continue;
            broken(invalid(at(slot) + " has shape " + shape_text(f.entries[slot].facts.dims) + ", expected [d, " +
                           (slot == w_k ? "G*d_k" : "G*d_v") + "] with d = " + text(d) + " (the rows of " + dataset::w_q + ")"));
        }
    }
    out.spec.d_in = d;
    out.spec.qk_width = qk;
    out.spec.k_width = kw;
    out.spec.v_width = vw;

    // The heads H: the request's, else the file's (else 1 for a run); the K/V heads G: the
    // request's, else the file's, else what the key width says.
    broken(agreement_rule(request.heads, stated_heads, "--heads", attribute::heads, f.file));
    std::int64_t heads = request.heads != 0 ? request.heads : stated_heads;
    if (heads == 0 && heads_default_to_one && !heads_unknown) heads = 1;
    out.heads = heads;
    const std::string stated_by = request.heads == 0 && stated_heads != 0 ? "the attribute heads of " + f.file : "";
    if (heads > 0 && !broken(detail::heads_divide_rule(heads, qk, "the columns H*d_k", f.file + ":" + dataset::w_q, stated_by))) {
        const std::int64_t d_k = qk / heads;
        broken(agreement_rule(request.kv_heads, stated_kv_heads, "--kv-heads", attribute::kv_heads, f.file));
        std::int64_t kv_heads = request.kv_heads != 0 ? request.kv_heads : stated_kv_heads;
        if (kv_heads != 0) {
            const std::string source = request.kv_heads != 0 ? "given" : "the attribute of " + f.file;
            if (broken(detail::kv_heads_divide_rule(kv_heads, heads, source))) {
                kv_heads = 0;
            } else if (kw != kv_heads * d_k) {
                broken(invalid(at(w_k) + " has shape " + shape_text(k) + ", expected [d, G*d_k] with G*d_k = " + text(kv_heads) +
                               "*" + text(d_k) + " = " + text(kv_heads * d_k) + " (G = " + text(kv_heads) +
                               " K/V heads, d_k from " + dataset::w_q + " and H = " + text(heads) +
                               "); hint: check --heads and --kv-heads"));
                kv_heads = 0;
            }
        } else {
            kv_heads = detail::kv_heads_from_widths(heads, d_k, kw);
            if (kv_heads == 0) {
                broken(invalid(at(w_k) + " has shape " + shape_text(k) + ", expected " + shape_text(q) + " like " + dataset::w_q +
                               " (keys and queries share d_k = " + text(d_k) + "), or [" + text(d) + ", G*" + text(d_k) +
                               "] for G K/V heads dividing H = " + text(heads) +
                               " (grouped-query attention); hint: check --heads and --kv-heads"));
            }
        }
        if (kv_heads > 0 && vw % kv_heads != 0) {
            broken(invalid(at(w_v) + " has shape " + shape_text(v) + ": its columns G*d_v = " + text(vw) +
                           " are not a multiple of G = " + text(kv_heads) + " K/V heads; hint: check --kv-heads"));
            kv_heads = 0;
        }
        out.kv_heads = kv_heads;
    } else if (heads == 0 && (kw > qk || qk % kw != 0)) {
        // No head count: the widths alone, keys sharing d_k with the queries, so G*d_k divides H*d_k.
        broken(invalid(at(w_k) + " has shape " + shape_text(k) + ", expected [d, G*d_k] with G*d_k dividing H*d_k = " +
                       text(qk) + " (the columns of " + dataset::w_q + ")"));
    }

    // The output projection reads the heads' values side by side: H*d_v rows.
    if (usable[w_o]) {
        const Dims& o = f.entries[w_o].facts.dims;
        out.spec.has_w_o = true;
        out.spec.d_out = static_cast<std::int64_t>(o[1]);
        if (out.kv_heads > 0) {
            const std::int64_t d_v = vw / out.kv_heads, attended = heads * d_v;
            if (static_cast<std::int64_t>(o[0]) != attended) {
                broken(invalid(at(w_o) + " has shape " + shape_text(o) + ", expected [H*d_v, d_out] with H*d_v = " +
                               text(attended) + " (H = " + text(heads) + " heads of the d_v = " + text(d_v) +
                               " columns per head of " + dataset::w_v + ")"));
            }
        } else if (heads == 0 && kw <= qk && qk % kw == 0) {
            const std::int64_t group = qk / kw, attended = vw * group;  // H/G from the widths
            if (static_cast<std::int64_t>(o[0]) != attended) {
                broken(invalid(at(w_o) + " has shape " + shape_text(o) + ", expected [H*d_v, d_out] with H*d_v = " +
                               text(attended) + " (the columns G*d_v of " + dataset::w_v + " times H/G = " + text(group) + ")"));
            }
        }
    }

    // Each bias as wide as its matrix's columns; /b_o only with /w_o.
    const auto bias = [&](Slot slot, std::int64_t width, const char* matrix) {
        if (!usable[slot]) return;
        const Dims& dims = f.entries[slot].facts.dims;
        if (dims != Dims{static_cast<std::uint64_t>(width)}) {
            broken(invalid(at(slot) + " has shape " + shape_text(dims) + ", expected " +
                           shape_text(Dims{static_cast<std::uint64_t>(width)}) + " (the columns of " + matrix + ")"));
        }
    };
    bias(b_q, qk, dataset::w_q);
    bias(b_k, kw, dataset::w_k);
    bias(b_v, vw, dataset::w_v);
    if (usable[b_o]) {
        if (f.entries[w_o].kind == ObjectKind::missing) {
            broken(invalid(at(b_o) + " is present without " + dataset::w_o + "; expected " + dataset::w_o +
                           " [H*d_v, d_out] alongside it"));
        } else if (usable[w_o]) {
            bias(b_o, out.spec.d_out, dataset::w_o);
        }
    }
    out.spec.has_b_q = usable[b_q];
    out.spec.has_b_k = usable[b_k];
    out.spec.has_b_v = usable[b_v];
    out.spec.has_b_o = usable[b_o];
    return out;
}

}  // namespace

std::vector<const char*> WeightsSpec::datasets() const {
    const bool present[kSlots] = {true, true, true, has_w_o, has_b_q, has_b_k, has_b_v, has_b_o};
    std::vector<const char*> paths;
    for (int slot = 0; slot < kSlots; ++slot) {
        if (present[slot]) paths.push_back(kRules[slot].path);
    }
    return paths;
}

DescribedWeights describe_weights(const std::string& path, const WeightsRequest& request) {
    WeightsFacts facts;
    facts.file = path;
    try {
        const File file = detail::open_input_file(path, kOption);
        for (int slot = 0; slot < kSlots; ++slot) {
            WeightsFacts::Entry& entry = facts.entries[slot];
            entry.kind = object_kind(file, kRules[slot].path);
            if (entry.kind != ObjectKind::dataset) continue;
            entry.facts = open_entry(file, slot, entry.unreadable);
        }
        facts.root_datasets = root_datasets(file);
        for (auto [name, value] : {std::pair{attribute::heads, &facts.heads}, std::pair{attribute::kv_heads, &facts.kv_heads},
                                   std::pair{attribute::rope_theta, &facts.rope_theta}}) {
            if (has_attribute(file, name)) *value = read_root_attribute(file, name);
        }
    } catch (const H5Error& error) {
        detail::rethrow_read_failure(error);
    }
    Findings found = apply_rules(facts, request, true);
    if (!found.problems.empty()) detail::raise(found.problems.front());
    found.spec.path = path;
    return DescribedWeights{found.spec, found.heads, found.kv_heads};
}

WeightsCheck check_weights(const std::string& file, const FileSchema& schema, int heads) {
    std::optional<File> opened;  // only for datasets with filters, which the schema cannot judge
    WeightsFacts facts;
    facts.file = file;
    for (int slot = 0; slot < kSlots; ++slot) {
        WeightsFacts::Entry& entry = facts.entries[slot];
        const char* path = kRules[slot].path;
        if (const DatasetSchema* dataset = schema.dataset(path)) {
            entry.kind = ObjectKind::dataset;
            entry.facts = DatasetFacts{file, path, kOption, kRole, dataset->type, dataset->type.name(), dataset->dims};
            if (!dataset->filters.empty()) {
                try {
                    if (!opened) opened = detail::open_input_file(file, kOption);
                    open_entry(*opened, slot, entry.unreadable);
                } catch (const H5Error& error) {
                    detail::rethrow_read_failure(error);
                }
            }
        } else if (std::find(schema.groups.begin(), schema.groups.end(), path) != schema.groups.end()) {
            entry.kind = ObjectKind::group;
        }
    }
    for (const DatasetSchema& dataset : schema.datasets) {
        if (dataset.path.find('/', 1) == std::string::npos) facts.root_datasets.push_back(dataset.path);
    }
    for (auto [name, value] : {std::pair{attribute::heads, &facts.heads}, std::pair{attribute::kv_heads, &facts.kv_heads},
                               std::pair{attribute::rope_theta, &facts.rope_theta}}) {
        if (const AttributeValue* stated = schema.attribute(name)) *value = *stated;
    }
    WeightsRequest request;
    request.heads = heads;
    const Findings found = apply_rules(facts, request, false);

    WeightsCheck check;
    check.d = found.spec.d_in;
    check.qk_width = found.spec.qk_width;
    check.k_width = found.spec.k_width;
    check.v_width = found.spec.v_width;
    check.d_out = found.spec.d_out;
    check.heads = found.heads;
    check.kv_heads = found.kv_heads;
    check.present = found.present;
    check.spec = found.spec;
    check.spec.path = file;
    for (const RuleBreak& problem : found.problems) check.problems.push_back(problem.message);
    return check;
}

}  // namespace attnbatch::io
