// `attnbatch inspect FILE`: prints any HDF5 file's schema, decides whether it is an input or an
// output of `run`, and validates it as such. Exit 0 only when valid (and, for an output,
// complete); 3 when invalid or incomplete; 4 when unreadable; 2 for usage errors.
#include <algorithm>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "attnbatch/error.hpp"
#include "attnbatch/io/output/attention_maps.hpp"
#include "attnbatch/io/h5/file_schema.hpp"
#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/input/npy_shards.hpp"
#include "attnbatch/io/input/value_scan.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "inspect_report.hpp"
#include "ranges.hpp"

namespace attnbatch::cli {
namespace {

// The shared parser takes no positionals, so `inspect FILE` becomes `inspect --file FILE`. A
// token is positional unless it is an option or the value of the option before it.
std::vector<std::string> positional_as_file(const std::vector<std::string>& args, const po::options_description& options) {
    const auto takes_value = [&](const std::string& token) {
        if (token.rfind("--", 0) != 0 || token.find('=') != std::string::npos) return false;
        const std::string name = token.substr(2);
        if (name == "config") return true;
        try {
            const po::option_description* option = options.find_nothrow(name, true);
            return option && option->semantic()->max_tokens() > 0;
        } catch (const po::error&) {
            return false;  // ambiguous: the parser proper will say so
        }
    };
    std::vector<std::string> rewritten;
    bool options_ended = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& token = args[i];
        if (!options_ended && token == "--") {
            options_ended = true;
        } else if (!options_ended && token.size() > 1 && token[0] == '-') {
            rewritten.push_back(token);
            if (takes_value(token) && i + 1 < args.size()) rewritten.push_back(args[++i]);
        } else {
            rewritten.push_back("--file");
            rewritten.push_back(token);
        }
    }
    return rewritten;
}

bool ends_with(const std::string& text, const std::string& suffix) {
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool given(const po::variables_map& vm, const char* name) { return vm.count(name) && !vm[name].defaulted(); }

std::string text_option(const po::variables_map& vm, const char* name) {
    return vm.count(name) ? vm[name].as<std::string>() : std::string();
}

io::FileKind decide_kind(const io::FileSchema& schema, const po::variables_map& vm) {
    const std::string as = vm["as"].as<std::string>();
    if (as == "input") return io::FileKind::input;
    if (as == "output") return io::FileKind::output;
    if (as == "weights") return io::FileKind::weights;
    if (as == "maps") return io::FileKind::attention_maps;
    for (const char* option : {"dataset", "lengths", "query", "key", "value", "weights"}) {
        if (given(vm, option)) return io::FileKind::input;
    }
    return io::kind_of(schema);
}

// The rules `run` applies (io::describe_input with the same options), so "valid" here means
// `run` accepts the file with these options.
void validate_input(InspectReport& report, const io::FileSchema& schema, const po::variables_map& vm) {
    io::InputOptions options;
    options.input_path = report.path;
    options.dataset = text_option(vm, "dataset");
    options.lengths = text_option(vm, "lengths");
    options.query = text_option(vm, "query");
    options.key = text_option(vm, "key");
    options.value = text_option(vm, "value");
    options.weights_path = text_option(vm, "weights");
    options.heads = vm.count("heads") ? vm["heads"].as<int>() : 0;
    options.kv_heads = vm.count("kv-heads") ? vm["kv-heads"].as<int>() : 0;
    if (vm.count("heads") && options.heads < 1) {
        throw Error(exit_usage, "--heads: " + std::to_string(options.heads) + " is not a positive number of heads");
    }
    options.check_finite = !vm["quick"].as<bool>();
    const bool found_qkv = options.dataset.empty() && options.query.empty() && options.key.empty() &&
                           options.value.empty() && !schema.dataset(io::dataset::embeddings) &&
                           schema.dataset(io::dataset::query) && schema.dataset(io::dataset::key) &&
                           schema.dataset(io::dataset::value);
    if (found_qkv) {
        options.query = io::dataset::query;
        options.key = io::dataset::key;
        options.value = io::dataset::value;
        report.notes.push_back(std::string("Q/K/V found by name; run needs --query ") + io::dataset::query + " --key " +
                               io::dataset::key + " --value " + io::dataset::value);
    }
    try {
        report.input = io::describe_input(options);
    } catch (const Error& error) {
        report.code = error.exit_code();
        report.verdict = std::string("invalid input: ") + error.what();
        return;
    }
    const io::InputSpec& spec = *report.input;
    std::ostringstream line;
    line << "valid input: N=" << spec.n << ", L=" << spec.len;
    if (spec.mode == io::InputMode::embeddings) line << ", d=" << spec.d;
    line << ", H=" << spec.heads;
    if (spec.kv_head_count() != spec.heads) line << ", G=" << spec.kv_head_count();
    line << " (d_k=" << spec.d_k << ", d_v=" << spec.d_v << ", " << io::name_of(spec.dtype);
    if (spec.mode == io::InputMode::embeddings) {
        line << (spec.npy() ? ", " + std::to_string(spec.shards.size()) + " .npy shards" : ", embeddings " + spec.dataset);
    } else {
        line << ", Q/K/V " << spec.query << " " << spec.key << " " << spec.value
             << (spec.layout == io::QkvLayout::split ? " split [N, H, L, d]" : " packed [N, L, H*d]");
    }
    if (spec.packed) {
        line << ", packed layout: T=" << spec.tokens << " rows, ";
        if (spec.offsets.empty()) {
            line << "sequences end to end with the lengths of " << spec.lengths << ", L the longest";
        } else {
            line << "sequence n in rows " << spec.offsets << "[n].." << spec.offsets << "[n+1], L the longest";
        }
    } else {
        line << (spec.lengths.empty() ? ", no lengths: every sequence has L tokens" : ", lengths " + spec.lengths);
    }
    if (spec.weights) line << ", weights " << spec.weights->path << " giving D_out=" << spec.d_out();
    line << ")";
    if (!options.check_finite) line << "; values not scanned (--quick)";
    report.verdict = line.str();
}

void validate_output(InspectReport& report, const io::FileSchema& schema) {
    report.output = io::check_output(report.path, schema);
    const io::OutputCheck& check = *report.output;
    const std::string written =
        check.written >= 0 ? std::to_string(check.written) + " of " + std::to_string(check.n) + " sequences written" : "";
    if (!check.valid()) {
        report.code = exit_invalid_input;
        report.verdict = "invalid output: " + check.problems.front();
        if (check.problems.size() > 1) report.verdict += " (and " + std::to_string(check.problems.size() - 1) + " more)";
        return;
    }
    const std::string incomplete = check.complete == 1 ? std::string("complete")
                                                       : std::string("INCOMPLETE (attribute ") + io::attribute::complete +
                                                             " = " + std::to_string(check.complete.value_or(0)) + ")";
    report.verdict_is_state = true;
    if (report.in_progress) {
        report.code = exit_invalid_input;
        report.verdict = "output in progress: " + report.path + " is the partial file of a run that is going or was "
                         "interrupted, " + incomplete + ", " + written + "; hint: attnbatch run --resume continues it";
        return;
    }
    if (check.complete != 1) {
        report.code = exit_invalid_input;
        report.verdict = incomplete + ": " + written;
        return;
    }
    std::ostringstream line;
    line << "valid output: N=" << check.n << ", L=" << check.len << ", D_out=" << check.d_out << ", H=" << check.heads;
    if (check.packed) line << ", packed layout (T=" << check.tokens << " rows, " << io::dataset::offsets << ")";
    if (check.has_attention) {
        line << ", attention " << check.attention_dtype << " for sequences [" << check.attention_first << ", "
             << check.attention_first + check.attention_count << ")" << (check.attention_heads == 1 && check.heads > 1 ? " (mean over heads)" : "");
    } else {
        line << ", no attention weights";
    }
    if (check.first_sequence != 0) {
        line << ", rows are the input's sequences " << format_range(check.first_sequence, check.first_sequence + check.n);
    }
    line << "; complete";
    report.verdict = line.str();
}

void validate_maps(InspectReport& report, const io::FileSchema& schema) {
    const io::AttentionMapsCheck check = io::check_attention_maps(report.path, schema);
    if (!check.valid()) {
        report.code = exit_invalid_input;
        report.verdict = "invalid attention maps: " + check.problems.front();
        return;
    }
    report.verdict = "valid attention maps (attnbatch weights): sequences " + format_indices(check.sequence_indices) +
                     " x heads " + format_indices(check.head_indices) + ", L=" + std::to_string(check.len) +
                     ", float32 [S, H_sel, L, L]";
}

void validate_weights(InspectReport& report, const io::FileSchema& schema, const po::variables_map& vm) {
    report.weights = io::check_weights(report.path, schema, vm.count("heads") ? vm["heads"].as<int>() : 0);
    io::WeightsCheck& check = *report.weights;
    // The values last, as run scans them (every one finite and within float32's range):
    // a file inspect calls valid must be one run accepts.
    const bool scan = !vm["quick"].as<bool>();
    if (check.valid() && scan) {
        io::InputSpec values;
        values.weights = check.spec;
        try {
            io::ValueScanner(values).scan_weights();
        } catch (const Error& error) {
            if (error.exit_code() != exit_invalid_input) throw;
            check.problems.push_back(error.what());
        }
    }
    if (!check.valid()) {
        report.code = exit_invalid_input;
        report.verdict = "invalid weights: " + check.problems.front();
        if (check.problems.size() > 1) report.verdict += " (and " + std::to_string(check.problems.size() - 1) + " more)";
        return;
    }
    std::ostringstream line;
    line << "valid weights: d=" << check.d << ", H*d_k=" << check.qk_width;
    if (check.k_width != check.qk_width) line << ", G*d_k=" << check.k_width << ", G*d_v=" << check.v_width;
    else line << ", H*d_v=" << check.v_width;
    if (check.d_out > 0) line << ", d_out=" << check.d_out;
    if (check.heads > 0) line << ", H=" << check.heads;
    if (check.kv_heads > 0 && check.kv_heads != check.heads) line << ", G=" << check.kv_heads;
    line << " (";
    for (std::size_t i = 0; i < check.present.size(); ++i) line << (i ? " " : "") << check.present[i];
    line << ")";
    if (!scan) line << "; values not scanned (--quick)";
    line << "; check it against an input with: attnbatch inspect INPUT --weights " << report.path;
    report.verdict = line.str();
}

void inspect(InspectReport& report, const po::variables_map& vm) {
    if (io::is_npy_input(report.path)) {  // .npy shards: an input, validated as `run` would
        report.kind = io::FileKind::input;
        return validate_input(report, io::FileSchema{}, vm);
    }
    report.in_progress = ends_with(report.path, ".partial");
    report.schema = io::read_file_schema(report.path);
    report.kind = decide_kind(*report.schema, vm);
    switch (report.kind) {
        case io::FileKind::input: validate_input(report, *report.schema, vm); break;
        case io::FileKind::output: validate_output(report, *report.schema); break;
        case io::FileKind::weights: validate_weights(report, *report.schema, vm); break;
        case io::FileKind::attention_maps: validate_maps(report, *report.schema); break;
        case io::FileKind::unknown:
            report.code = exit_invalid_input;
            report.verdict = report.path + ": neither an attnbatch input nor an output: no " + io::dataset::embeddings +
                             ", no " + io::dataset::query + " " + io::dataset::key + " " + io::dataset::value + ", no " +
                             io::dataset::output + ", no " + io::dataset::w_q +
                             "; hint: --dataset NAME names the embeddings, --as forces a kind";
            break;
    }
}

}  // namespace

int inspect_command(const std::vector<std::string>& args) {
    const CommandSpec spec{
        "inspect",
        "FILE may also be given as the first argument: attnbatch inspect FILE [options].\n"
        "Prints an HDF5 file's schema (every dataset: dtype, shape, chunks, filters, dimension labels,\n"
        "attributes; the root attributes), then validates it: as an input of `run` when it has /embeddings\n"
        "(or --dataset; /tokens with /offsets: the packed layout) or /query /key /value, with the rules `run`\n"
        "applies; as an output when it has /output or /lse, against the output schema and its `complete`\n"
        "attribute; as a projection weights file when it has /w_q /w_k /w_v; as the attention maps of\n"
        "`weights --to FILE.h5` when it has /attention alone. Every schema: docs/formats.md in the repository.\n"
        "Exit 0 when valid (an output also complete), 3 when invalid, incomplete or in progress (.partial),\n"
        "4 when the file cannot be read, 2 for usage errors.",
        "  attnbatch inspect data.h5\n"
        "  attnbatch inspect data.h5 --heads 8 --weights w.h5\n"
        "  attnbatch inspect qkv.h5 --query /q --key /k --value /v --quick\n"
        "  attnbatch inspect out.h5 --json\n"};
    po::options_description options("inspect options");
    options.add_options()
        ("file", po::value<std::string>()->value_name("FILE"), "the HDF5 file (or give it as the first argument)")
        ("as", po::value<std::string>()->default_value("auto"), "validate as auto|input|output|weights|maps (maps: a file of `weights --to`)")
        ("dataset", po::value<std::string>(), "input: the embeddings [N, L, d] [/embeddings]")
        ("lengths", po::value<std::string>(), "input: valid tokens per sequence, integer [N] [/lengths if present]; none: ignore them")
        ("query", po::value<std::string>(), "input: queries [N, L, H*d_k] or [N, H, L, d_k] [/query when found]")
        ("key", po::value<std::string>(), "input: keys, like --query [/key when found]")
        ("value", po::value<std::string>(), "input: values [N, L, H*d_v] or [N, H, L, d_v] [/value when found]")
        ("heads", po::value<int>(), "input: attention heads H, as `run --heads` [1, or from [N, H, L, d] data or the weights file]")
        ("kv-heads", po::value<int>(), "input: K/V heads G, as `run --kv-heads` [from the data or the weights file, else H]")
        ("weights", po::value<std::string>()->value_name("FILE"), "input: also check this projection weights file")
        ("quick", po::bool_switch(), "input, weights: skip the full read for NaN/inf (shapes, types and lengths only)")
        ("json", po::bool_switch(), "print one JSON object (schema, verdict, sizes) instead of text");
    po::variables_map vm;
    if (!parse_command_line(spec, options, positional_as_file(args, options), vm)) return exit_ok;
    if (!vm.count("file") || vm["file"].as<std::string>().empty()) {
        throw Error(exit_usage, "FILE is required: attnbatch inspect FILE (or --file FILE)");
    }
    const std::string as = vm["as"].as<std::string>();
    if (as != "auto" && as != "input" && as != "output" && as != "weights" && as != "maps") {
        throw Error(exit_usage, "--as: '" + as + "' is not one of auto|input|output|weights|maps");
    }

    InspectReport report;
    report.path = vm["file"].as<std::string>();
    try {
        inspect(report, vm);
    } catch (const Error& error) {
        if (error.exit_code() == exit_usage) throw;  // options at fault, not the file: no report
        report.code = error.exit_code();
        report.verdict = error.what();
    }
    if (vm["json"].as<bool>()) {
        print_json(std::cout, report);
    } else {
        print_text(std::cout, report);
    }
    if (report.code == exit_ok) return exit_ok;
    // The text report already said the state; stderr says why the exit code is not 0.
    if (report.verdict_is_state && !vm["json"].as<bool>()) {
        throw Error(report.code, report.path + ": not a complete output (" + (report.in_progress ? "in progress" : "incomplete") +
                                     ", see above)");
    }
    throw Error(report.code, report.verdict);
}

}  // namespace attnbatch::cli
