#include "recorded_run_checks.hpp"

#include "attnbatch/error.hpp"
#include "attnbatch/io/h5/file_schema.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "attnbatch/io/models/weights_hash.hpp"

#include <string>

namespace attnbatch::cli {

namespace {

// `recorded` 0: an output of an earlier version without the attribute, nothing to compare.
void expect_same(const io::OutputReader& output, const std::string& what, std::int64_t recorded, std::int64_t found,
                 const std::string& found_where) {
    if (recorded == 0 || recorded == found) return;
    throw Error(exit_invalid_input, output.path() + " records " + what + " = " + std::to_string(recorded) + ", but " +
                                        found_where + " gives " + what + " = " + std::to_string(found) +
                                        "; expected the files the run read; hint: check --input and --weights");
}

}  // namespace

void check_recorded_shape(const io::OutputReader& output, const RecordedRun& run) {
    const io::InputSpec& in = run.input;
    const io::Provenance recorded = output.provenance();
    const std::string from = in.weights ? in.path + " with " + in.weights->path : in.path;
    expect_same(output, "heads", recorded.heads, in.heads, from);
    expect_same(output, "kv_heads", recorded.kv_heads, in.kv_head_count(), from);
    expect_same(output, "d_k", recorded.d_k, in.d_k, from);
    expect_same(output, "d_v", recorded.d_v, in.d_v, from);
    const io::OutputLayout& layout = output.layout();
    expect_same(output, "H (the heads of " + std::string(io::dataset::lse) + ")", layout.heads, in.heads, from);
    expect_same(output, "D_out (the columns of " + std::string(io::dataset::output) + ")", layout.d_out, in.d_out(), from);
    if (!layout.packed) expect_same(output, "L (the rows of " + std::string(io::dataset::output) + ")", layout.len, in.len, from);
}

void check_recorded_weights(const io::OutputReader& output, const RecordedRun& run) {
    if (!run.input.weights || !run.projections || run.identity.empty()) return;
    const std::string where = std::string(" (") + io::dataset::journal_identity + " of " + output.path() + ")";
    const std::string& path = run.input.weights->path;
    const std::string recorded_path = run.identity_field("weights");
    if (recorded_path == "(none)") {
        throw Error(exit_invalid_input, "--weights " + path + ": the run used no projection weights" + where +
                                            "; hint: drop --weights");
    }
    const std::string hash = run.identity_field("weights xxh3");
    if (hash.empty()) return;
    const std::string found = io::weights_hash(*run.projections);
    if (found == hash) return;
    throw Error(exit_invalid_input, path + ": the weights file differs from the one the run used: its values hash to " + found +
                                        ", the run's to " + hash + where + "; hint: give --weights the run's file" +
                                        (recorded_path.empty() ? std::string() : ", recorded as " + recorded_path));
}

void check_output_lengths(const io::OutputReader& output, const RecordedRun& run, io::InputReader& reader) {
    const io::FileSchema schema = io::read_file_schema(output.path());
    const io::DatasetSchema* stored = schema.dataset(io::dataset::lengths);
    const std::int64_t n = output.layout().n;
    const std::string expected = "expected an integer [" + std::to_string(n) + "] dataset (one length per sequence)";
    if (stored == nullptr) {
        throw Error(exit_invalid_input, output.path() + ": dataset " + io::dataset::lengths + " is missing; " + expected);
    }
    if (stored->type.type_class != io::TypeClass::integer || stored->dims.size() != 1 ||
        stored->dims[0] != static_cast<std::uint64_t>(n)) {
        std::string shape;
        for (std::size_t i = 0; i < stored->dims.size(); ++i) shape += (i ? ", " : "") + std::to_string(stored->dims[i]);
        throw Error(exit_invalid_input, output.path() + ": dataset " + io::dataset::lengths + " is " + stored->type.name() +
                                            " [" + shape + "]; " + expected);
    }
    std::vector<std::int32_t> got;
    output.read_lengths(0, n, got);
    const std::vector<std::int32_t> input = reader.read_all_lengths();
    const std::int64_t first = run.input.first_sequence;
    for (std::size_t i = 0; i < got.size() && i < input.size(); ++i) {
        if (got[i] == input[i]) continue;
        throw Error(exit_invalid_input, output.path() + ": " + io::dataset::lengths + " records " + std::to_string(got[i]) +
                                            " tokens for sequence " + std::to_string(first + static_cast<std::int64_t>(i)) +
                                            ", but " + run.input.path + " gives it " + std::to_string(input[i]) +
                                            "; expected the input the run read; hint: check --input");
    }
}

}  // namespace attnbatch::cli
