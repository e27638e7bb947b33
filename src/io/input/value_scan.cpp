// The value scan: the input's data datasets and the weights, each opened once.
#include "attnbatch/io/input/value_scan.hpp"

#include "attnbatch/io/h5/dataset.hpp"
#include "attnbatch/io/h5/error.hpp"
#include "attnbatch/io/h5/file.hpp"
#include "attnbatch/io/input/npy_shards.hpp"
#include "h5/open_checked.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <vector>

namespace attnbatch::io {
namespace {

std::string number_text(double value) {
    std::ostringstream out;
    out << value;
    return out.str();
}

// Everything is computed in float32: a finite float64 beyond FLT_MAX would become inf.
void expect_finite(const Dataset& dataset, std::size_t max_bytes, std::uint64_t first, std::uint64_t last) {
    const std::optional<BadValue> bad =
        find_first_non_finite(dataset, max_bytes, static_cast<double>(FLT_MAX), first, last);
    if (!bad) return;
    const std::string at = dataset.where().file + ": dataset " + dataset.path();
    if (!std::isfinite(bad->value)) {
        throw Error(exit_invalid_input, at + " has a non-finite value (" + number_text(bad->value) + ") at " +
                                            shape_text(bad->index) + ", expected finite values everywhere, padding "
                                            "included; hint: replace them, e.g. numpy.nan_to_num");
    }
    throw Error(exit_invalid_input, at + " has the value " + number_text(bad->value) + " at " + shape_text(bad->index) +
                                        ", beyond float32's range (|x| <= 3.4e38) used for the compute; hint: rescale "
                                        "the data");
}

}  // namespace

struct ValueScanner::Files {
    std::optional<File> input;
    std::vector<Dataset> data;  // x, or q, k, v
    std::optional<Dataset> offsets;  // the packed layout
    std::optional<NpyShardSet> npy;   // .npy shards, mapped
    std::vector<std::int64_t> npy_offsets;  // packed shards: the stored sequences' rows
    std::optional<File> weights;
    std::vector<Dataset> matrices;   // the weights present, in the documented order
};

ValueScanner::ValueScanner(const InputSpec& spec, std::size_t max_bytes)
    : spec_(spec), max_bytes_(max_bytes), files_(std::make_unique<Files>()) {}
ValueScanner::ValueScanner(ValueScanner&&) noexcept = default;
ValueScanner& ValueScanner::operator=(ValueScanner&&) noexcept = default;
ValueScanner::~ValueScanner() = default;

void ValueScanner::scan_sequences(std::int64_t first, std::int64_t last) {
    if (spec_.npy()) return scan_npy_sequences(first, last);
    try {
        Files& f = *files_;
        if (!f.input) {
            f.input = detail::open_input_file(spec_.path, "--input");
            const auto open = [&](const std::string& path, const char* option, const char* role) {
                f.data.push_back(detail::open_input_dataset(*f.input, path, option, role));
            };
            if (spec_.mode == InputMode::embeddings) {
                open(spec_.dataset, "--dataset", "the embeddings [N, L, d]");
            } else {
                open(spec_.query, "--query", "the queries [N, L, H*d_k] or [N, H, L, d_k]");
                open(spec_.key, "--key", "the keys [N, L, H*d_k] or [N, H, L, d_k]");
                open(spec_.value, "--value", "the values [N, L, H*d_v] or [N, H, L, d_v]");
            }
            if (spec_.packed) f.offsets = Dataset::open(*f.input, spec_.offsets);
        }
        // Sequences as stored in the file (run --sequences selects a block of them).
        auto begin = static_cast<std::uint64_t>(spec_.first_sequence + std::max<std::int64_t>(0, first));
        auto end = static_cast<std::uint64_t>(spec_.first_sequence + std::max(first, last));
        if (f.offsets) {  // packed: the rows [offsets[begin], offsets[end]) of those sequences
            const auto clamp = [&](std::uint64_t s) {
                return std::min<std::uint64_t>(s, static_cast<std::uint64_t>(spec_.first_sequence + spec_.n));
            };
            std::int64_t rows[2] = {0, 0};
            read_rows(*f.offsets, clamp(begin), 1, &rows[0], 1);
            read_rows(*f.offsets, clamp(end), 1, &rows[1], 1);
            begin = static_cast<std::uint64_t>(rows[0]);
            end = static_cast<std::uint64_t>(std::max(rows[0], rows[1]));
        }
        for (const Dataset& dataset : f.data) expect_finite(dataset, max_bytes_, begin, end);
    } catch (const H5Error& error) {
        detail::rethrow_read_failure(error);
    }
}

void ValueScanner::scan_npy_sequences(std::int64_t first, std::int64_t last) {
    Files& f = *files_;
    if (!f.npy) {
        f.npy.emplace(spec_);
        if (spec_.packed) f.npy_offsets = npy_stored_offsets(spec_);
    }
    const std::int64_t stored_end = spec_.first_sequence + spec_.n;
    std::int64_t begin = std::min(spec_.first_sequence + std::max<std::int64_t>(0, first), stored_end);
    std::int64_t end = std::min(spec_.first_sequence + std::max(first, last), stored_end);
    if (spec_.packed) {
        begin = f.npy_offsets[static_cast<std::size_t>(begin)];
        end = f.npy_offsets[static_cast<std::size_t>(end)];
    }
    f.npy->expect_finite_rows(begin, end);
}

void ValueScanner::scan_weights() {
    if (!spec_.weights) return;
    try {
        Files& f = *files_;
        if (!f.weights) {
            f.weights = detail::open_input_file(spec_.weights->path, "--weights");
            for (const char* path : spec_.weights->datasets()) {
                f.matrices.push_back(detail::open_input_dataset(*f.weights, path, "--weights", "the projections file "));
            }
        }
        for (const Dataset& matrix : f.matrices) {
            expect_finite(matrix, max_bytes_, 0, std::numeric_limits<std::uint64_t>::max());
        }
    } catch (const H5Error& error) {
        detail::rethrow_read_failure(error);
    }
}

}  // namespace attnbatch::io
