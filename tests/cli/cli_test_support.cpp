#include "cli_test_support.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace attnbatch::cli::testing {
namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// fork + exec with stdout and stderr in files: no pipes to drain, no shell to quote for.
Outcome execute(const std::string& program, const std::vector<std::string>& args,
            const std::vector<std::pair<std::string, std::string>>& env, bool merge_stderr) {
    const TempDir scratch;
    const std::string out_path = scratch.file("stdout"), err_path = scratch.file("stderr");
    std::vector<std::string> environment;
    for (char** variable = environ; *variable; ++variable) {
        if (std::strncmp(*variable, "ATTNBATCH_", 10) != 0) environment.emplace_back(*variable);
    }
    for (const auto& [name, value] : env) environment.push_back(name + "=" + value);
    std::vector<char*> argv{const_cast<char*>(program.c_str())};
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (std::string& variable : environment) envp.push_back(variable.data());
    envp.push_back(nullptr);

    const pid_t child = ::fork();
    if (child < 0) throw std::runtime_error("fork failed");
    if (child == 0) {
        const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int err = merge_stderr ? out : ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (out < 0 || err < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(127);
        ::execve(program.c_str(), argv.data(), envp.data());
        ::_exit(127);
    }
    int status = 0;
    while (::waitpid(child, &status, 0) < 0) {
        if (errno != EINTR) throw std::runtime_error("waitpid failed");
    }
    Outcome run;
    run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    run.out = read_file(out_path);
    run.err = merge_stderr ? std::string() : read_file(err_path);
    return run;
}

}  // namespace

Outcome attnbatch(const std::vector<std::string>& args, const std::vector<std::pair<std::string, std::string>>& env) {
    return execute(ATTNBATCH_BINARY, args, env, false);
}

bool exists(const std::string& path) {
    struct stat status {};
    return ::lstat(path.c_str(), &status) == 0;
}

std::string digest(const std::string& path) {
    if (!exists(path)) return "";
    // FNV-1a 64 over the bytes: any change to the file changes it in practice.
    std::uint64_t hash = 0xcbf29ce484222325ULL;
    for (const char c : read_file(path)) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 0x100000001b3ULL;
    }
    return std::to_string(hash);
}

void write_text(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
}

std::size_t line_count(const std::string& text) {
    std::size_t lines = 0;
    for (const char c : text) lines += c == '\n';
    return lines;
}

io::Dims dataset_dims(const std::string& path, const std::string& dataset) {
    const io::File file = io::File::open(path, io::FileMode::read_only);
    return io::Dataset::open(file, dataset).dims();
}

io::TypeInfo dataset_type(const std::string& path, const std::string& dataset) {
    const io::File file = io::File::open(path, io::FileMode::read_only);
    return io::Dataset::open(file, dataset).type_info();
}

bool has_object(const std::string& path, const std::string& object) {
    const io::File file = io::File::open(path, io::FileMode::read_only);
    return io::object_kind(file, object) != io::ObjectKind::missing;
}

Outcome python(const std::string& script, const std::vector<std::string>& args) {
    const TempDir scratch;
    const std::string script_path = scratch.file("check.py");
    write_text(script_path, script);
    std::vector<std::string> all{script_path};
    all.insert(all.end(), args.begin(), args.end());
    return execute(ATTNBATCH_H5PY_PYTHON, all, {}, true);
}

bool h5py_available() {
    static const bool available = python("import h5py, numpy\n", {}).status == 0;
    return available;
}

}  // namespace attnbatch::cli::testing
