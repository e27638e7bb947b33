// The built `attnbatch` binary, run as a user runs it (see run_program).
#pragma once

#include "support/child_process.hpp"

#include <string>
#include <vector>

namespace attnbatch::testing {

Outcome attnbatch(const std::vector<std::string>& args, const Environment& env = {});

}  // namespace attnbatch::testing
