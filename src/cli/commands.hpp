// The subcommand table: one function per subcommand, each returning its exit code.
#pragma once

#include <string>
#include <vector>

namespace attnbatch::cli {

int bench_command(const std::vector<std::string>& args);
int import_weights_command(const std::vector<std::string>& args);
int generate_command(const std::vector<std::string>& args);
int inspect_command(const std::vector<std::string>& args);
int run_command(const std::vector<std::string>& args);
int verify_command(const std::vector<std::string>& args);
int weights_command(const std::vector<std::string>& args);

// The subcommands' names, in the order of the usage text (what an INI [section] may be).
std::vector<std::string> subcommand_names();

// Dispatches argv to a subcommand; turns every error into a one-line message and an exit code.
int run_cli(int argc, char** argv);

}  // namespace attnbatch::cli
