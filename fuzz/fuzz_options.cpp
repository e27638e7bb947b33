// libFuzzer target: the option and --config parsing of every subcommand.
//
// Input: byte 0 picks what is parsed; the rest is text.
//   0 run       parse_run_options(argv), every check of `run`'s options included
//   1..5        bench, generate, inspect, verify, weights: the real subcommand with
//               --print-config first, so parsing (command line, ATTNBATCH_*, --config,
//               notify) runs in full and the command stops right after it
//   6           parse_bytes(text)
//   7           parse_isa(text)
// For 0..5 the text before the first NUL byte is argv, one word per line; the text after it,
// when present, is an INI file passed as --config (written to /dev/shm, one file per process).
//
// Expected outcomes: success, or Error with exit code 2. Anything else escaping, a crash,
// UB or a leak is a finding. Words may not name files: '/' becomes '_', and the fuzzer runs in
// a scratch directory (scripts/fuzz.sh), so --config given in argv reads nothing of ours.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "command_line.hpp"
#include "commands.hpp"
#include "run_options.hpp"

extern char** environ;

namespace {

using namespace attnbatch::cli;

std::string g_config_path;
std::ostringstream g_sink;  // what --help / --print-config print

[[noreturn]] void finding(const std::string& what) {
    std::fprintf(stderr, "fuzz_options finding: %s\n", what.c_str());
    std::abort();
}

void expect_usage_error(const Error& e) {
    if (e.exit_code() != exit_usage) finding("Error with exit code " + std::to_string(e.exit_code()) + ": " + e.what());
    if (std::string(e.what()).empty()) finding("Error with an empty message");
}

void check_run_options(const RunOptions& o) {
    if (o.stop) return;
    if (o.max_memory == 0) finding("run: --max-memory resolved to 0 bytes");
    if (o.input.heads < 0 || o.kernel.threads < 0 || o.kernel.block_q < 0 || o.kernel.block_k < 0 ||
        o.unit_sequences < 0 || o.gzip_level < 0 || o.gzip_level > 9) {
        finding("run: a negative or out-of-range count was accepted");
    }
    if (!(o.scale >= 0) || !std::isfinite(o.scale)) finding("run: a non-finite or negative --scale was accepted");
    if (o.weights_seqs_given && !(0 <= o.weights_first && o.weights_first < o.weights_last)) {
        finding("run: --weights-seqs accepted an empty or negative range");
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    // ATTNBATCH_* from the caller's environment would take part in every parse.
    std::vector<std::string> ours;
    for (char** e = environ; *e; ++e) {
        if (std::strncmp(*e, "ATTNBATCH_", 10) == 0) ours.emplace_back(*e, std::strcspn(*e, "="));
    }
    for (const auto& name : ours) ::unsetenv(name.c_str());
    g_config_path = "/dev/shm/attnbatch-fuzz-options-" + std::to_string(::getpid()) + ".ini";
    std::atexit([] { std::remove(g_config_path.c_str()); });
    std::cout.rdbuf(g_sink.rdbuf());
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const int what = data[0] % 8;
    const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
    g_sink.str(std::string());

    if (what == 6 || what == 7) {
        try {
            if (what == 6) {
                const std::size_t bytes = parse_bytes(text, "--max-memory");
                if (bytes == 0) finding("parse_bytes('" + text + "') returned 0, not a positive size");
            } else {
                parse_isa(text);
            }
        } catch (const Error& e) {
            expect_usage_error(e);
        }
        return 0;
    }

    const std::size_t nul = text.find('\0');
    std::vector<std::string> args;
    if (what != 0) args.push_back("--print-config");  // parse fully, then stop: never run the command
    if (nul != std::string::npos) {
        std::ofstream(g_config_path, std::ios::binary | std::ios::trunc) << text.substr(nul + 1);
        args.push_back("--config");
        args.push_back(g_config_path);
    }
    std::istringstream lines(text.substr(0, nul));
    for (std::string word; std::getline(lines, word);) {
        for (char& c : word) {
            if (c == '/') c = '_';
        }
        args.push_back(word);
    }

    try {
        int code = exit_ok;
        switch (what) {
            case 0: check_run_options(parse_run_options(args)); break;
            case 1: code = bench_command(args); break;
            case 2: code = generate_command(args); break;
            case 3: code = inspect_command(args); break;
            case 4: code = verify_command(args); break;
            case 5: code = weights_command(args); break;
        }
        // With --print-config (or --help) parsed, a subcommand returns 0 before doing anything.
        if (code != exit_ok) finding("a subcommand returned " + std::to_string(code) + " instead of stopping");
        // describe_options says so for a value type it does not know ("?" was once its mark,
        // which a string value can hold too).
        if (g_sink.str().find("(a value of a type --print-config cannot show)") != std::string::npos) {
            finding("--print-config could not show a value:\n" + g_sink.str());
        }
    } catch (const Error& e) {
        expect_usage_error(e);
    }
    return 0;
}
