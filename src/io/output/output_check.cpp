// The output schema rules, each failure one line naming file, dataset, expected and found.
#include "attnbatch/io/output/output_check.hpp"

#include "attnbatch/io/h5/attribute.hpp"
#include "attnbatch/io/h5/dataset.hpp"
#include "attnbatch/io/h5/file.hpp"
#include "attnbatch/io/h5/scan.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "attnbatch/io/output/output_reader.hpp"
#include "attnbatch/kernels/isa.hpp"

#include <algorithm>

namespace attnbatch::io {
namespace {

class Checker {
public:
    Checker(const File& file, const FileSchema& schema, OutputCheck& check)
        : file_(file), schema_(schema), check_(check) {}

    void problem(const std::string& text) { check_.problems.push_back(file_.path() + ": " + text); }

    // The dataset at `path` with one of `types` and rank `rank`, or null (and a problem).
    const DatasetSchema* expect(const std::string& path, const std::vector<std::string>& types, std::size_t rank,
                                const std::string& expected) {
        const DatasetSchema* dataset = schema_.dataset(path);
        if (!dataset) {
            problem("dataset " + path + " is missing, expected " + expected);
            return nullptr;
        }
        const std::string type = dataset->type.name();
        if (std::find(types.begin(), types.end(), type) == types.end()) {
            problem("dataset " + path + " has dtype " + type + ", expected " + expected);
            return nullptr;
        }
        if (dataset->dims.size() != rank) {
            problem("dataset " + path + " has shape " + shape_text(dataset->dims) + " (rank " +
                    std::to_string(dataset->dims.size()) + "), expected " + expected + " (rank " + std::to_string(rank) + ")");
            return nullptr;
        }
        return dataset;
    }

    // Axis `axis` of `dataset` must equal `value` (named `name`, taken from `source`).
    bool expect_extent(const DatasetSchema& dataset, std::size_t axis, std::int64_t value, const std::string& name,
                       const std::string& expected, const std::string& source) {
        if (static_cast<std::int64_t>(dataset.dims[axis]) == value) return true;
        problem("dataset " + dataset.path + " has shape " + shape_text(dataset.dims) + ", expected " + expected +
                " with " + name + " = " + std::to_string(value) + " (from " + source + ")");
        return false;
    }

    // `object`: "/" or the dataset holding the attribute. Worded as the attribute readers word
    // it (attribute.hpp), since those refuse what fails here.
    std::optional<std::int64_t> integer_attribute(const AttributeValue* attribute, const std::string& object) {
        if (!attribute) return std::nullopt;
        if (attribute->kind != AttributeValue::Kind::integer || attribute->integers.size() != 1) {
            wrong_type(*attribute, object, "a scalar integer");
            return std::nullopt;
        }
        return attribute->integers[0];
    }

    void wrong_type(const AttributeValue& attribute, const std::string& object, const std::string& expected) {
        problem(attribute_label(object, attribute.name) + " is " + attribute_type_text(attribute.type, attribute.shape) +
                ", expected " + expected);
    }

    // The attributes verify and weights read (OutputReader): each of the type they read it as,
    // so that an output inspect calls valid is one they can read.
    void expect_read_types() {
        for (const char* name : {attribute::heads, attribute::kv_heads, attribute::d_k, attribute::d_v, attribute::ranks,
                                 attribute::threads, attribute::causal}) {
            integer_attribute(schema_.attribute(name), "/");
        }
        for (const char* name : {attribute::scale, attribute::rope_theta}) {
            const AttributeValue* value = schema_.attribute(name);
            if (!value) continue;
            const bool number = (value->kind == AttributeValue::Kind::integer && value->integers.size() == 1) ||
                                (value->kind == AttributeValue::Kind::real && value->reals.size() == 1);
            if (!number) wrong_type(*value, "/", "a scalar number");
        }
        for (const char* name : {attribute::version, attribute::creation_time, attribute::input_file,
                                 attribute::input_file_absolute, attribute::weights_file, attribute::weights_file_absolute,
                                 attribute::input_dataset, attribute::io_mode, attribute::precision}) {
            const AttributeValue* value = schema_.attribute(name);
            if (value && value->kind != AttributeValue::Kind::text) wrong_type(*value, "/", "a scalar string");
        }
        const AttributeValue* precision = schema_.attribute(attribute::precision);
        if (precision && precision->kind == AttributeValue::Kind::text && !kernels::find_precision(precision->text)) {
            problem(std::string("root attribute ") + attribute::precision + " is '" + precision->text + "', expected fp32 or bf16");
        }
    }

    const File& file_;
    const FileSchema& schema_;
    OutputCheck& check_;
};

void check_attention(Checker& c, OutputCheck& check, const std::string& source) {
    const FileSchema& schema = c.schema_;
    const AttributeValue* save = schema.attribute(attribute::save_weights);
    const std::string save_weights = save && save->kind == AttributeValue::Kind::text ? save->text : std::string();
    if (!schema.dataset(dataset::attention)) {
        if (save_weights == "all" || save_weights == "mean") {
            c.problem(std::string("dataset ") + dataset::attention + " is missing but the attribute " +
                      attribute::save_weights + " = " + save_weights);
        }
        return;
    }
    const std::string expected = "float32 or float16 [N_w, H or 1, L, L]";
    const DatasetSchema* attention = c.expect(dataset::attention, {"float32", "float16"}, 4, expected);
    if (!attention) return;
    check.has_attention = true;
    c.integer_attribute(attention->attribute(attribute::mean_over_heads), attention->path);
    check.attention_dtype = attention->type.name();
    check.attention_count = static_cast<std::int64_t>(attention->dims[0]);
    check.attention_heads = static_cast<std::int64_t>(attention->dims[1]);
    if (save_weights == "none") {
        check.warnings.push_back(std::string(dataset::attention) + " is present although the attribute " +
                                 attribute::save_weights + " = none");
    }
    if (check.len > 0) {
        if (c.expect_extent(*attention, 2, check.len, "L", expected, source)) {
            c.expect_extent(*attention, 3, check.len, "L", expected, source);
        }
    }
    if (check.heads > 0) {
        const std::int64_t heads = check.attention_heads;
        const std::int64_t wanted = save_weights == "mean" ? 1 : save_weights == "all" ? check.heads : 0;
        if (wanted > 0 ? heads != wanted : heads != check.heads && heads != 1) {
            c.problem("dataset " + attention->path + " has shape " + shape_text(attention->dims) + ", expected " +
                      (wanted > 0 ? "H_w = " + std::to_string(wanted) + " for " + attribute::save_weights + " = " +
                                        save_weights
                                  : "H_w = H = " + std::to_string(check.heads) + " or 1") +
                      " (H from " + dataset::lse + ")");
        }
    }
    if (check.n <= 0) return;
    const std::optional<std::int64_t> first =
        c.integer_attribute(attention->attribute(attribute::first_sequence), attention->path);
    if (!first && check.attention_count < check.n) {
        c.problem("dataset " + attention->path + " holds " + std::to_string(check.attention_count) + " of N = " +
                  std::to_string(check.n) + " sequences but has no attribute " + attribute::first_sequence);
        return;
    }
    check.attention_first = first.value_or(check.first_sequence);
    const std::int64_t rows_first = check.first_sequence, rows_last = check.first_sequence + check.n;
    if (check.attention_first < rows_first || check.attention_first + check.attention_count > rows_last) {
        c.problem("dataset " + attention->path + " covers sequences [" + std::to_string(check.attention_first) + ", " +
                  std::to_string(check.attention_first + check.attention_count) + ") (" + attribute::first_sequence + " = " +
                  std::to_string(check.attention_first) + ", " + std::to_string(check.attention_count) +
                  " sequences), expected within the output's [" + std::to_string(rows_first) + ", " +
                  std::to_string(rows_last) + ")");
    }
}

// /lengths values: 0..L once written, -1 before (the marker resuming relies on).
void check_lengths(Checker& c, OutputCheck& check) {
    const Dataset lengths = Dataset::open(c.file_, dataset::lengths);
    std::int64_t unwritten = 0, first_unwritten = -1;
    bool bad = false;
    check.written = 0;
    scan_blocks(lengths, default_scan_bytes, MemType::i64,
                    [&](const Slab& block, const void* data, std::size_t count) {
                        const auto* values = static_cast<const std::int64_t*>(data);
                        for (std::size_t i = 0; i < count; ++i) {
                            const std::int64_t value = values[i];
                            const auto index = static_cast<std::int64_t>(block.offset[0] + i);
                            if (value >= 0 && value <= check.len) {
                                ++check.written;
                            } else if (value == -1) {
                                if (unwritten++ == 0) first_unwritten = index;
                            } else {
                                c.problem(lengths.path() + "[" + std::to_string(index) + "] = " + std::to_string(value) +
                                          ", expected 0 <= length <= L = " + std::to_string(check.len) +
                                          " (or -1 for a sequence not yet written)");
                                bad = true;
                                return false;
                            }
                        }
                        return true;
                    });
    if (!bad && check.complete == 1 && unwritten > 0) {
        c.problem(std::string("the attribute ") + attribute::complete + " = 1 but " + std::to_string(unwritten) + " of " +
                  std::to_string(check.n) + " sequences are unwritten (" + dataset::lengths + "[" +
                  std::to_string(first_unwritten) + "] = -1)");
    }
}

// The packed layout: /offsets rising from 0 to T; each /lengths value its sequence's rows,
// or -1 while unwritten. Sets n, len (the longest sequence) and written.
void check_packed_rows(Checker& c, OutputCheck& check, std::int64_t tokens) {
    const Dataset offsets_dataset = Dataset::open(c.file_, dataset::offsets);
    const std::vector<std::int64_t> offsets = read_all<std::int64_t>(offsets_dataset);
    const std::string at = std::string(dataset::offsets);
    for (std::size_t i = 0; i < offsets.size(); ++i) {
        if ((i == 0 && offsets[0] != 0) || (i > 0 && offsets[i] < offsets[i - 1])) {
            c.problem(at + "[" + std::to_string(i) + "] = " + std::to_string(offsets[i]) +
                      ", expected offsets rising from 0 (sequence n is rows offsets[n]..offsets[n+1])");
            return;
        }
        if (i > 0) check.len = std::max(check.len, offsets[i] - offsets[i - 1]);
    }
    if (offsets.back() != tokens) {
        c.problem(at + "[" + std::to_string(offsets.size() - 1) + "] = " + std::to_string(offsets.back()) +
                  ", expected T = " + std::to_string(tokens) + " (the rows of " + dataset::output + ")");
        return;
    }
    check.len = std::max<std::int64_t>(check.len, 1);
    const std::vector<std::int32_t> lengths = read_all<std::int32_t>(Dataset::open(c.file_, dataset::lengths));
    std::int64_t unwritten = 0, first_unwritten = -1;
    check.written = 0;
    for (std::size_t i = 0; i < lengths.size() && i + 1 < offsets.size(); ++i) {
        const std::int64_t rows = offsets[i + 1] - offsets[i];
        if (lengths[i] == rows) {
            ++check.written;
        } else if (lengths[i] == -1) {
            if (unwritten++ == 0) first_unwritten = static_cast<std::int64_t>(i);
        } else {
            c.problem(std::string(dataset::lengths) + "[" + std::to_string(i) + "] = " + std::to_string(lengths[i]) +
                      ", expected " + std::to_string(rows) + " (the rows " + at + " gives it) or -1 for a sequence not yet written");
            return;
        }
    }
    if (check.complete == 1 && unwritten > 0) {
        c.problem(std::string("the attribute ") + attribute::complete + " = 1 but " + std::to_string(unwritten) + " of " +
                  std::to_string(check.n) + " sequences are unwritten (" + dataset::lengths + "[" +
                  std::to_string(first_unwritten) + "] = -1)");
    }
}

void check_packed(Checker& c, OutputCheck& check) {
    const FileSchema& schema = c.schema_;
    const DatasetSchema* output = c.expect(dataset::output, {"float32"}, 2, "float32 [T, D_out] (packed layout)");
    const DatasetSchema* lse = c.expect(dataset::lse, {"float32"}, 2, "float32 [H, T] (packed layout)");
    const DatasetSchema* offsets = c.expect(dataset::offsets, {"int64", "int32", "uint64", "uint32"}, 1, "int64 [N+1]");
    const DatasetSchema* lengths = c.expect(dataset::lengths, {"int32"}, 1, "int32 [N]");
    if (!output || !offsets) return;
    const auto tokens = static_cast<std::int64_t>(output->dims[0]);
    check.d_out = static_cast<std::int64_t>(output->dims[1]);
    check.n = static_cast<std::int64_t>(offsets->dims[0]) - 1;
    const std::string source = output->path + " " + shape_text(output->dims) + " and " + offsets->path + " " +
                               shape_text(offsets->dims);
    if (lse) {
        check.heads = static_cast<std::int64_t>(lse->dims[0]);
        c.expect_extent(*lse, 1, tokens, "T", "[H, T]", source);
    }
    if (check.n < 1) {
        c.problem("dataset " + offsets->path + " has shape " + shape_text(offsets->dims) + ", expected [N+1] with N >= 1");
        return;
    }
    if (lengths && !c.expect_extent(*lengths, 0, check.n, "N", "[N]", source)) lengths = nullptr;
    check.packed = true;
    check.tokens = tokens;
    // Peeked here for the /lengths rule; check_output() reports a malformed `complete`.
    const AttributeValue* complete = schema.attribute(attribute::complete);
    if (complete && complete->kind == AttributeValue::Kind::integer && complete->integers.size() == 1) {
        check.complete = complete->integers[0];
    }
    if (lengths) check_packed_rows(c, check, tokens);
    // The maps are per sequence, [N_w, H_w, L, L], L at least the longest sequence.
    if (const DatasetSchema* attention = schema.dataset(dataset::attention); attention && attention->dims.size() == 4) {
        const auto map_len = static_cast<std::int64_t>(attention->dims[2]);
        if (map_len < check.len) {
            c.problem("dataset " + attention->path + " has shape " + shape_text(attention->dims) + ", expected L >= " +
                      std::to_string(check.len) + ", the longest sequence (from " + source + ")");
        }
        check.len = map_len;
    }
    check_attention(c, check, source);
}

}  // namespace

OutputCheck check_output(const std::string& path, const FileSchema& schema) {
    const File file = File::open(path, FileMode::read_only);
    OutputCheck check;
    Checker c(file, schema, check);
    const DatasetSchema* packed_output = schema.dataset(dataset::output);
    const bool packed = schema.dataset(dataset::offsets) && packed_output && packed_output->dims.size() == 2;

    const DatasetSchema* output = packed ? nullptr : c.expect(dataset::output, {"float32"}, 3, "float32 [N, L, D_out]");
    const DatasetSchema* lse = packed ? nullptr : c.expect(dataset::lse, {"float32"}, 3, "float32 [N, H, L]");
    // Before the packed checks, which check /attention's sequences against the rows'.
    if (const std::optional<std::int64_t> first =
            c.integer_attribute(schema.attribute(attribute::first_sequence), "/")) {
        check.first_sequence = *first;
        if (*first < 0) c.problem(std::string("root attribute ") + attribute::first_sequence + " = " + std::to_string(*first) + ", expected >= 0");
    }
    if (packed) check_packed(c, check);
    std::string source;
    if (output) {
        check.n = static_cast<std::int64_t>(output->dims[0]);
        check.len = static_cast<std::int64_t>(output->dims[1]);
        check.d_out = static_cast<std::int64_t>(output->dims[2]);
        source = output->path + " " + shape_text(output->dims);
    } else if (lse) {
        check.n = static_cast<std::int64_t>(lse->dims[0]);
        check.len = static_cast<std::int64_t>(lse->dims[2]);
        source = lse->path + " " + shape_text(lse->dims);
    }
    if (lse) {
        check.heads = static_cast<std::int64_t>(lse->dims[1]);
        if (output) {
            if (c.expect_extent(*lse, 0, check.n, "N", "[N, H, L]", source)) {
                c.expect_extent(*lse, 2, check.len, "L", "[N, H, L]", source);
            }
        }
    }
    const DatasetSchema* lengths = packed ? nullptr : c.expect(dataset::lengths, {"int32"}, 1, "int32 [N]");
    if (lengths && !source.empty() && !c.expect_extent(*lengths, 0, check.n, "N", "[N]", source)) lengths = nullptr;

    if (!packed) check_attention(c, check, source);

    const DatasetSchema* config = schema.dataset(dataset::config);
    if (!config) {
        c.problem(std::string("no dataset ") + dataset::config +
                  ", expected the run's resolved configuration (a scalar string) that every output of attnbatch run records");
    } else if (config->type.type_class != TypeClass::string || element_count(config->dims) != 1) {
        c.problem(config->path + " is " + attribute_type_text(config->type.name(), config->dims) + ", expected a scalar string");
    } else {
        std::optional<WeightsDtype> maps;
        if (check.has_attention) maps = check.attention_dtype == "float16" ? WeightsDtype::f16 : WeightsDtype::f32;
        for (const std::string& text : recorded_options_problems(parse_recorded_options(read_text_dataset(file, dataset::config)), maps)) {
            c.problem(text);
        }
    }

    const AttributeValue* complete = schema.attribute(attribute::complete);
    if (!complete) {
        c.problem(std::string("no root attribute ") + attribute::complete +
                  ", expected 0 (in progress) or 1 (every sequence written)");
    } else {
        check.complete = c.integer_attribute(complete, "/");
        if (check.complete && *check.complete != 0 && *check.complete != 1) {
            c.problem(std::string("root attribute ") + attribute::complete + " = " + std::to_string(*check.complete) + ", expected 0 or 1");
        }
    }
    c.expect_read_types();
    const AttributeValue* heads_attribute = schema.attribute(attribute::heads);
    if (const std::optional<std::int64_t> heads =
            heads_attribute && heads_attribute->kind == AttributeValue::Kind::integer && heads_attribute->integers.size() == 1
                ? std::optional(heads_attribute->integers[0])
                : std::nullopt;
        heads && check.heads > 0 && *heads != check.heads) {
        c.problem(std::string("root attribute ") + attribute::heads + " = " + std::to_string(*heads) + " but " +
                  dataset::lse + " has H = " + std::to_string(check.heads));
    }
    std::string missing;
    for (const char* name : {attribute::version, attribute::creation_time, attribute::input_file,
                             attribute::input_dataset, attribute::heads, attribute::causal, attribute::scale,
                             attribute::ranks, attribute::threads, attribute::io_mode}) {
        if (!schema.attribute(name)) missing += std::string(missing.empty() ? "" : ", ") + name;
    }
    if (!missing.empty()) check.warnings.push_back("provenance attributes missing: " + missing);

    if (lengths && check.len > 0) check_lengths(c, check);
    return check;
}

}  // namespace attnbatch::io
