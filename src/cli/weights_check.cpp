#include "weights_check.hpp"

#include <optional>

namespace attnbatch::cli {

using io::shape_text;
namespace {

}  // namespace

WeightsCheck check_weights(const std::string& file, const FileSchema& schema, int heads) {
    WeightsCheck check;
    const auto problem = [&](const std::string& text) { check.problems.push_back(file + ": " + text); };
    // The shape of `path` when it is a float32/float64 dataset of `rank`; nothing otherwise.
    const auto matrix = [&](const std::string& path, std::size_t rank, const std::string& expected,
                            bool required) -> std::optional<io::Dims> {
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
        if (dataset->dims.size() != rank || io::element_count(dataset->dims) == 0) {
            problem("dataset " + path + " has shape " + shape_text(dataset->dims) + ", expected " + expected);
            return std::nullopt;
        }
        return dataset->dims;
    };
    const auto expect = [&](const std::string& path, const std::optional<io::Dims>& found, const io::Dims& wanted,
                            const std::string& why) {
        if (found && *found != wanted) {
            problem("dataset " + path + " has shape " + shape_text(*found) + ", expected " + shape_text(wanted) + " " + why);
        }
    };

    const std::optional<io::Dims> w_q = matrix("/w_q", 2, "[d, H*d_k]", true);
    const std::optional<io::Dims> w_k = matrix("/w_k", 2, "[d, H*d_k]", true);
    const std::optional<io::Dims> w_v = matrix("/w_v", 2, "[d, H*d_v]", true);
    const std::optional<io::Dims> w_o = matrix("/w_o", 2, "[H*d_v, d_out]", false);
    const std::optional<io::Dims> b_q = matrix("/b_q", 1, "[H*d_k]", false);
    const std::optional<io::Dims> b_k = matrix("/b_k", 1, "[H*d_k]", false);
    const std::optional<io::Dims> b_v = matrix("/b_v", 1, "[H*d_v]", false);
    const std::optional<io::Dims> b_o = matrix("/b_o", 1, "[d_out]", false);
    if (!w_q || !w_v) return check;

    check.d = static_cast<std::int64_t>((*w_q)[0]);
    check.qk_width = static_cast<std::int64_t>((*w_q)[1]);
    check.v_width = static_cast<std::int64_t>((*w_v)[1]);
    expect("/w_k", w_k, *w_q, "like /w_q (keys and queries share d_k)");
    if ((*w_v)[0] != (*w_q)[0]) {
        problem("dataset /w_v has shape " + shape_text(*w_v) + ", expected [d, H*d_v] with d = " +
                std::to_string(check.d) + " (the rows of /w_q)");
    }
    if (w_o) {
        check.d_out = static_cast<std::int64_t>((*w_o)[1]);
        expect("/w_o", w_o, {(*w_v)[1], (*w_o)[1]}, "(its rows are the columns H*d_v of /w_v)");
    } else if (schema.dataset("/b_o")) {
        problem("dataset /b_o is present without /w_o; expected /w_o [H*d_v, d_out] alongside it");
    }
    expect("/b_q", b_q, {(*w_q)[1]}, "(the columns of /w_q)");
    expect("/b_k", b_k, {(*w_q)[1]}, "(the columns of /w_k)");
    expect("/b_v", b_v, {(*w_v)[1]}, "(the columns of /w_v)");
    if (w_o) expect("/b_o", b_o, {(*w_o)[1]}, "(the columns of /w_o)");
    if (heads > 0) {
        for (const auto& [what, width] : {std::pair{"H*d_k (columns of /w_q)", check.qk_width},
                                          std::pair{"H*d_v (columns of /w_v)", check.v_width}}) {
            if (width % heads != 0) {
                problem(std::string("--heads ") + std::to_string(heads) + " does not divide " + what + " = " +
                        std::to_string(width));
            }
        }
    }
    return check;
}

}  // namespace attnbatch::cli
