// Running another program as a user would, and capturing what the user would see.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace attnbatch::testing {

struct Outcome {
    int status = -1;  // the exit code; -1 when killed by a signal
    std::string out;
    std::string err;  // empty when merged into `out`
};

using Environment = std::vector<std::pair<std::string, std::string>>;

// Runs `program args...` with the caller's environment minus every ATTNBATCH_* variable (a
// developer's shell must not change the results) plus `env`; stderr goes to `out` when
// `merge_stderr`.
Outcome run_program(const std::string& program, const std::vector<std::string>& args, const Environment& env = {},
                    bool merge_stderr = false);

// The system Python with h5py (ATTNBATCH_H5PY_PYTHON): another reader's view of our files.
bool h5py_available();
// Runs `script` with `args` as sys.argv[1:]; stdout and stderr together in `out`.
Outcome python(const std::string& script, const std::vector<std::string>& args);

}  // namespace attnbatch::testing
