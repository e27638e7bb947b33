// Why bf16 runs without AMX tiles (amx_permission.hpp): the reason run's header and bench show
// on a CPU with AMX, and nothing on a CPU without it or once the tiles are granted. The request
// itself needs an AMX CPU; this checks the sentence for each answer it can get.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "amx_permission.hpp"

namespace attnbatch::cli {
namespace {

TEST(AmxRefusal, NothingToExplainWithoutAmxOrOnceGranted) {
    EXPECT_EQ(amx_refusal_reason(false, false, 0), "");
    EXPECT_EQ(amx_refusal_reason(false, true, 0), "");     // the variable alone explains nothing
    EXPECT_EQ(amx_refusal_reason(false, false, EPERM), "");
    EXPECT_EQ(amx_refusal_reason(true, false, 0), "");     // granted
}

TEST(AmxRefusal, NamesTheVariableThatForbidsTheTiles) {
    const std::string why = amx_refusal_reason(true, true, 0);
    EXPECT_NE(why.find(kNoAmxVariable), std::string::npos) << why;
}

TEST(AmxRefusal, NamesLinuxsRefusalAndItsError) {
    const std::string why = amx_refusal_reason(true, false, EINVAL);
    EXPECT_NE(why.find("Linux refused"), std::string::npos) << why;
    EXPECT_NE(why.find("ARCH_REQ_XCOMP_PERM"), std::string::npos) << why;
    EXPECT_NE(why.find(std::strerror(EINVAL)), std::string::npos) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << "one line: " << why;
}

// This process's own answer agrees with the CPU: no AMX, no reason; AMX, a reason exactly when
// the tiles were not granted.
TEST(AmxRefusal, ThisProcessAgreesWithItsPermission) {
#if defined(__x86_64__)
    const bool cpu_has_amx = __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16");
#else
    const bool cpu_has_amx = false;
#endif
    if (!cpu_has_amx) {
        EXPECT_EQ(amx_refusal(), "");
        EXPECT_FALSE(amx_permitted());
    } else {
        EXPECT_EQ(amx_refusal().empty(), amx_permitted()) << amx_refusal();
    }
}

}  // namespace
}  // namespace attnbatch::cli
