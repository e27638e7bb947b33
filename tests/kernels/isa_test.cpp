// The backend table as callers see it: names, lookup, preference order and `best`.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "attnbatch/kernels/isa.hpp"

namespace attnbatch::test {
namespace {

namespace kn = attnbatch::kernels;

TEST(Isa, EveryNameIsFoundAndNamesItself) {
    const std::vector<std::string> names = kn::isa_names();
    ASSERT_FALSE(names.empty());
    EXPECT_EQ(names.front(), "best");
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size()) << "names must be unique";
    for (const std::string& name : names) {
        const auto isa = kn::find_isa(name);
        ASSERT_TRUE(isa.has_value()) << name;
        EXPECT_EQ(kn::isa_name(*isa), name);
    }
    for (const char* text : {"", "nonsense", "Portable", "AVX2", "best "}) {
        EXPECT_FALSE(kn::find_isa(text).has_value()) << "'" << text << "'";
    }
}

// Output files record these names (resume identity) and --isa accepts them: never renamed. New
// backends may join; these stay, in this order.
TEST(Isa, ReleasedNamesStay) {
#if defined(__x86_64__) || defined(__i386__)
    const std::vector<std::string> released{"best", "avx512", "avx2", "portable"};
#else
    const std::vector<std::string> released{"best", "portable"};
#endif
    const std::vector<std::string> names = kn::isa_names();
    auto at = names.begin();
    for (const std::string& name : released) {
        at = std::find(at, names.end(), name);
        ASSERT_NE(at, names.end()) << name << " is missing or out of order";
    }
}

TEST(Isa, BestIsTheFirstBackendThisCpuRuns) {
    const std::vector<kn::Isa> built = kn::built_isas();
    ASSERT_FALSE(built.empty());
    EXPECT_EQ(built.back(), kn::Isa::portable) << "portable comes last: it runs everywhere";
    EXPECT_TRUE(kn::isa_available(kn::Isa::best));
    EXPECT_TRUE(kn::isa_available(kn::Isa::portable));
    kn::Isa first = kn::Isa::portable;
    for (kn::Isa isa : built) {
        if (kn::isa_available(isa)) {
            first = isa;
            break;
        }
    }
    EXPECT_EQ(kn::resolve_isa(kn::Isa::best), first);
    EXPECT_EQ(kn::resolve_isa(kn::Isa{}), first) << "a default Isa is best";
    for (kn::Isa isa : built) EXPECT_EQ(kn::resolve_isa(isa), isa) << kn::isa_name(isa);
}

}  // namespace
}  // namespace attnbatch::test
