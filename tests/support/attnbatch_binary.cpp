#include "support/attnbatch_binary.hpp"

namespace attnbatch::testing {

Outcome attnbatch(const std::vector<std::string>& args, const Environment& env) {
    return run_program(ATTNBATCH_BINARY, args, env);
}

}  // namespace attnbatch::testing
