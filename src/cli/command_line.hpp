// What every subcommand shares: --help with examples, --config FILE.ini, ATTNBATCH_<OPTION>
// environment overrides, --print-config, and one-line usage errors with exit code 2.
#pragma once

#include <boost/program_options.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "attnbatch/error.hpp"

namespace attnbatch::cli {

namespace po = boost::program_options;

struct CommandSpec {
    std::string name;      // "bench"
    std::string summary;   // one line
    std::string examples;  // printed under --help
};

// Parses argv (after the subcommand name) into `vm`. Precedence: command line, then
// environment (ATTNBATCH_SEQ_LEN for --seq-len), then --config, then defaults. Returns false
// when --help or --print-config was handled and the command should stop with exit 0.
// `hidden`: options accepted but not listed by --help (old spellings kept working).
bool parse_command_line(const CommandSpec& spec, po::options_description& options,
                        const std::vector<std::string>& args, po::variables_map& vm,
                        const po::options_description* hidden = nullptr);

// How --config files are read: the content, or nullopt when unreadable. Under MPI, rank 0
// reads the file and broadcasts it, so that every rank parses the same text.
using ConfigReader = std::function<std::optional<std::string>(const std::string& path)>;
void set_config_reader(ConfigReader reader);

// The resolved options, one "name = value" line each (defaults marked): what --print-config
// prints and what a run records in its output.
std::string describe_options(const po::variables_map& vm);

}  // namespace attnbatch::cli
