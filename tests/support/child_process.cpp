#include "support/child_process.hpp"

#include "support/file_bytes.hpp"
#include "support/temp_dir.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace attnbatch::testing {

// fork + exec with stdout and stderr in files: no pipes to drain, no shell to quote for.
Outcome run_program(const std::string& program, const std::vector<std::string>& args, const Environment& env,
                    bool merge_stderr) {
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
    run.out = read_text(out_path);
    run.err = merge_stderr ? std::string() : read_text(err_path);
    return run;
}

Outcome python(const std::string& script, const std::vector<std::string>& args) {
    const TempDir scratch;
    const std::string script_path = scratch.file("check.py");
    write_text(script_path, script);
    std::vector<std::string> all{script_path};
    all.insert(all.end(), args.begin(), args.end());
    return run_program(ATTNBATCH_H5PY_PYTHON, all, {}, true);
}

bool h5py_available() {
    static const bool available = python("import h5py, numpy\n", {}).status == 0;
    return available;
}

}  // namespace attnbatch::testing
