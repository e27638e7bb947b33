// The weights file rules, each failure one line naming file, dataset, expected and found.
#include "attnbatch/io/models/weights_check.hpp"

#include "attnbatch/io/h5/schema_names.hpp"

#include <string>

#include <optional>

namespace attnbatch::io {

WeightsCheck check_weights(const std::string& file, const FileSchema& schema, int heads) {
    WeightsCheck check;
    const auto problem = [&](const std::string& text) { check.problems.push_back(file + ": " + text); };
    // The shape of `path` when it is a float32/float64 dataset of `rank`; nothing otherwise.
    const auto matrix = [&](const std::string& path, std::size_t rank, const std::string& expected,
                            bool required) -> std::optional<Dims> {
        const DatasetSchema* dataset = schema.dataset(path);
        if (!dataset) {
            if (required) problem("dataset " + path + " is missing, expected " + expected);
            return std::nullopt;
        }
        check.present.push_back(path);
        const std::string type = dataset->type.name();
        if (type != "float32" && type != "float64") {
            problem("dataset " + path + " has dtype " + type + ", expected float32 or float64");
            return std::nullopt;
        }
        if (dataset->dims.size() != rank || element_count(dataset->dims) == 0) {
            problem("dataset " + path + " has shape " + shape_text(dataset->dims) + ", expected " + expected);
            return std::nullopt;
        }
        return dataset->dims;
    };
    const auto expect = [&](const std::string& path, const std::optional<Dims>& found, const Dims& wanted,
                            const std::string& why) {
        if (found && *found != wanted) {
            problem("dataset " + path + " has shape " + shape_text(*found) + ", expected " + shape_text(wanted) + " " + why);
        }
    };

    const std::optional<Dims> w_q = matrix(dataset::w_q, 2, "[d, H*d_k]", true);
    const std::optional<Dims> w_k = matrix(dataset::w_k, 2, "[d, G*d_k]", true);
    const std::optional<Dims> w_v = matrix(dataset::w_v, 2, "[d, G*d_v]", true);
    const std::optional<Dims> w_o = matrix(dataset::w_o, 2, "[H*d_v, d_out]", false);
    const std::optional<Dims> b_q = matrix(dataset::b_q, 1, "[H*d_k]", false);
    const std::optional<Dims> b_k = matrix(dataset::b_k, 1, "[G*d_k]", false);
    const std::optional<Dims> b_v = matrix(dataset::b_v, 1, "[G*d_v]", false);
    const std::optional<Dims> b_o = matrix(dataset::b_o, 1, "[d_out]", false);
    if (!w_q || !w_v) return check;

    check.d = static_cast<std::int64_t>((*w_q)[0]);
    check.qk_width = static_cast<std::int64_t>((*w_q)[1]);
    check.v_width = static_cast<std::int64_t>((*w_v)[1]);
    check.k_width = w_k ? static_cast<std::int64_t>((*w_k)[1]) : check.qk_width;
    const auto stated = [&](const char* name) -> std::int64_t {
        const AttributeValue* value = schema.attribute(name);
        return value && value->kind == AttributeValue::Kind::integer && value->integers.size() == 1 ? value->integers[0] : 0;
    };
    check.heads = heads > 0 ? heads : stated(attribute::heads);
    check.kv_heads = stated(attribute::kv_heads);
    const auto columns_of = [](const char* matrix_path) { return std::string("(the columns of ") + matrix_path + ")"; };
    if (w_k && (*w_k)[0] != (*w_q)[0]) {
        problem(std::string("dataset ") + dataset::w_k + " has shape " + shape_text(*w_k) + ", expected [d, G*d_k] with d = " +
                std::to_string(check.d) + " (the rows of " + dataset::w_q + ")");
    }
    // Keys share d_k with the queries: G/H = the ratio of their widths.
    if (w_k && (check.k_width > check.qk_width || check.qk_width % check.k_width != 0)) {
        problem(std::string("dataset ") + dataset::w_k + " has shape " + shape_text(*w_k) + ", expected [d, G*d_k] with G*d_k "
                "dividing H*d_k = " + std::to_string(check.qk_width) + " (the columns of " + dataset::w_q + ")");
        return check;
    }
    const std::int64_t group = check.qk_width / check.k_width;  // H / G
    if ((*w_v)[0] != (*w_q)[0]) {
        problem(std::string("dataset ") + dataset::w_v + " has shape " + shape_text(*w_v) + ", expected [d, G*d_v] with d = " +
                std::to_string(check.d) + " (the rows of " + dataset::w_q + ")");
    }
    if (w_o) {
        check.d_out = static_cast<std::int64_t>((*w_o)[1]);
        expect(dataset::w_o, w_o, {(*w_v)[1] * static_cast<std::uint64_t>(group), (*w_o)[1]},
               std::string("(its rows H*d_v are the columns G*d_v of ") + dataset::w_v + " times H/G = " + std::to_string(group) + ")");
    } else if (schema.dataset(dataset::b_o)) {
        problem(std::string("dataset ") + dataset::b_o + " is present without " + dataset::w_o + "; expected " +
                dataset::w_o + " [H*d_v, d_out] alongside it");
    }
    expect(dataset::b_q, b_q, {(*w_q)[1]}, columns_of(dataset::w_q));
    expect(dataset::b_k, b_k, {static_cast<std::uint64_t>(check.k_width)}, columns_of(dataset::w_k));
    expect(dataset::b_v, b_v, {(*w_v)[1]}, columns_of(dataset::w_v));
    if (w_o) expect(dataset::b_o, b_o, {(*w_o)[1]}, columns_of(dataset::w_o));
    if (check.heads > 0) {
        const std::string source = heads > 0 ? "--heads " : std::string("attribute ") + attribute::heads + " = ";
        if (check.qk_width % check.heads != 0) {
            problem(source + std::to_string(check.heads) + " does not divide H*d_k (columns of " + dataset::w_q + ") = " +
                    std::to_string(check.qk_width));
        } else if (check.heads % group != 0) {
            problem(source + std::to_string(check.heads) + " is no multiple of H/G = " + std::to_string(group) +
                    " (the columns of " + dataset::w_q + " over those of " + dataset::w_k + ")");
        } else {
            const std::int64_t groups = check.heads / group;
            if (check.kv_heads > 0 && check.kv_heads != groups) {
                problem(std::string("attribute ") + attribute::kv_heads + " = " + std::to_string(check.kv_heads) + " but the widths of " +
                        dataset::w_q + " and " + dataset::w_k + " give G = " + std::to_string(groups) + " for H = " +
                        std::to_string(check.heads));
            }
            check.kv_heads = groups;
            if (check.v_width % groups != 0) {
                problem("G = " + std::to_string(groups) + " does not divide G*d_v (columns of " + dataset::w_v + ") = " +
                        std::to_string(check.v_width));
            }
        }
    }
    return check;
}

}  // namespace attnbatch::io
