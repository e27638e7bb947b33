#include "test_support.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>

namespace attnbatch::io::testing {

TempDir::TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "attnbatch_io_XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
}

TempDir::~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
}

std::vector<float> ramp(std::size_t count) {
    std::vector<float> values(count);
    for (std::size_t i = 0; i < count; ++i) values[i] = 0.25f * static_cast<float>(i % 17) - 2.0f;
    return values;
}

std::vector<double> ramp64(std::size_t count) {
    std::vector<double> values(count);
    for (std::size_t i = 0; i < count; ++i) values[i] = 0.25 * static_cast<double>(i % 17) - 2.0;
    return values;
}

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

void write_text(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
}

namespace {
std::string quoted(const std::string& text) {
    std::string out = "'";
    for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}
}  // namespace

PythonResult run_python(const std::string& script, const std::vector<std::string>& args) {
    const TempDir scratch;
    const std::string script_path = scratch.file("check.py");
    write_text(script_path, script);
    std::string command = std::string(ATTNBATCH_H5PY_PYTHON) + " " + quoted(script_path);
    for (const auto& arg : args) command += " " + quoted(arg);
    command += " 2>&1";
    PythonResult result;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (!pipe) return result;
    char buffer[4096];
    std::size_t got;
    while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, got);
    const int status = ::pclose(pipe);
    result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
}

bool h5py_available() {
    static const bool available = run_python("import h5py\n", {}).status == 0;
    return available;
}

}  // namespace attnbatch::io::testing
