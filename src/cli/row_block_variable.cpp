#include "row_block_variable.hpp"

#include <cstdlib>
#include <string>

#include "attnbatch/error.hpp"
#include "attnbatch/kernels/isa.hpp"

namespace attnbatch::cli {

void apply_row_block_variable() {
    const char* value = std::getenv(kRowBlockVariable);
    if (value == nullptr || *value == '\0') {
        kernels::set_avx512_row_block(0);  // the CPU's choice, also after a call that had it set
        return;
    }
    const std::string text = value;
    if (text != "8" && text != "12") {
        throw Error(exit_usage, std::string(kRowBlockVariable) + "=" + text +
                                    ": expected 8 or 12 (rows per register tile of the avx512 fp32 kernel), or unset "
                                    "for this CPU's choice");
    }
    kernels::set_avx512_row_block(std::stoi(text));
}

}  // namespace attnbatch::cli
