#include "commands.hpp"

#include <exception>
#include <iostream>
#include <new>

#include "command_line.hpp"
#include "row_block_variable.hpp"

namespace attnbatch::cli {

namespace {

struct Subcommand {
    const char* name;
    const char* summary;
    int (*run)(const std::vector<std::string>&);
};

const Subcommand kSubcommands[] = {
    {"run", "the batch job: attention over an HDF5 dataset into an HDF5 output", run_command},
    {"verify", "recompute sampled sequences of a run in fp64 and check the errors", verify_command},
    {"generate", "write a seeded synthetic input file (embeddings or Q/K/V, lengths, projection weights)", generate_command},
    {"inspect", "print an HDF5 file's schema and validate it as an attnbatch input or output", inspect_command},
    {"weights", "recompute attention maps of chosen sequences from /lse and the inputs", weights_command},
    {"bench", "time the attention kernel alone on synthetic data", bench_command},
    {"import-weights", "write a weights file from a PyTorch / Hugging Face attention layer (.safetensors)", import_weights_command},
};

void print_usage(std::ostream& out) {
    out << "Usage: attnbatch <subcommand> [options]   (attnbatch <subcommand> --help for details)\n\n"
           "Scaled dot-product self-attention, softmax(Q K^T / sqrt(d_k)) V, over batches of sequences.\n\n"
           "Subcommands:\n";
    for (const auto& s : kSubcommands) out << "  " << s.name << "\t" << s.summary << '\n';
}

}  // namespace

std::vector<std::string> subcommand_names() {
    std::vector<std::string> names;
    for (const auto& s : kSubcommands) names.emplace_back(s.name);
    return names;
}

int run_cli(int argc, char** argv) {
    if (argc < 2) {
        print_usage(std::cerr);
        return exit_usage;
    }
    const std::string name = argv[1];
    if (name == "--help" || name == "-h" || name == "help") {
        print_usage(std::cout);
        return exit_ok;
    }
    if (name == "--version") {
        std::cout << "attnbatch " << ATTNBATCH_VERSION << '\n';
        return exit_ok;
    }
    for (const auto& s : kSubcommands) {
        if (name != s.name) continue;
        const std::vector<std::string> args(argv + 2, argv + argc);
        try {
            apply_row_block_variable();
            return s.run(args);
        } catch (const Error& e) {
            std::cerr << "attnbatch " << name << ": error: " << e.what() << '\n';
            return e.exit_code();
        } catch (const std::bad_alloc&) {
            std::cerr << "attnbatch " << name << ": error: " << out_of_memory_message << '\n';
            return exit_out_of_memory;
        } catch (const std::exception& e) {
            std::cerr << "attnbatch " << name << ": internal error: " << e.what() << '\n';
            return exit_internal;
        }
    }
    std::cerr << "attnbatch: error: unknown subcommand '" << name << "'\n";
    print_usage(std::cerr);
    return exit_usage;
}

}  // namespace attnbatch::cli
