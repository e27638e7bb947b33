// half.hpp: IEEE binary16 conversion with round to nearest, ties to even. Checked against an
// independent rounding written in double arithmetic, exhaustively where that is cheap (every
// half, every midpoint between neighbouring halves) and on random floats elsewhere; and,
// where the CPU has F16C (which the kernels use for f16 weights), against the hardware.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "attnbatch/kernels/half.hpp"

namespace attnbatch::test {
namespace {

using kernels::float_to_half;
using kernels::half_to_float;

float from_bits(std::uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

// Any bit pattern, or (near_half_range) one with an exponent between 2^-27 and 2^17, where
// every rounding branch of float_to_half is taken.
std::uint32_t random_float_bits(std::mt19937& rng, bool near_half_range) {
    const std::uint32_t bits = static_cast<std::uint32_t>(rng());
    if (!near_half_range) return bits;
    const std::uint32_t exponent = 127 - 27 + static_cast<std::uint32_t>(rng() % 45);
    return (bits & 0x807fffffu) | (exponent << 23);
}

bool half_is_nan(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

// The value of a half from its fields, by the definition of the format.
double decode(std::uint16_t h) {
    const int exponent = (h >> 10) & 0x1f;
    const int mantissa = h & 0x3ff;
    const double sign = (h & 0x8000u) ? -1.0 : 1.0;
    if (exponent == 0x1f) return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * HUGE_VAL;
    if (exponent == 0) return sign * std::ldexp(mantissa, -24);
    return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// Nearest half to a non-NaN float, ties to even, in double arithmetic: scale |x| so that the
// half's quantum is 1, round with nearbyint (the default mode is to nearest even), rebuild.
std::uint16_t reference_half(float x) {
    const std::uint16_t sign = std::signbit(x) ? 0x8000u : 0u;
    const double a = std::fabs(static_cast<double>(x));
    if (a == 0.0) return sign;
    if (a >= 65520.0) return static_cast<std::uint16_t>(sign | 0x7c00u);  // 65504 + half a quantum
    int e = 0;
    std::frexp(a, &e);  // a in [2^(e-1), 2^e)
    int quantum = (e - 1 < -14 ? -14 : e - 1) - 10;
    double m = std::nearbyint(std::ldexp(a, -quantum));
    if (quantum == -24) return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(m));  // subnormal, or 2^-14
    if (m == 2048.0) {  // rounded up into the next binade
        m = 1024.0;
        ++quantum;
    }
    const int biased = quantum + 25;
    if (biased >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);
    return static_cast<std::uint16_t>(sign | (biased << 10) | (static_cast<int>(m) - 1024));
}

TEST(Half, DecodesEveryHalfByDefinition) {
    for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
        const std::uint16_t bits = static_cast<std::uint16_t>(h);
        const float f = half_to_float(bits);
        const double expected = decode(bits);
        if (std::isnan(expected)) {
            EXPECT_TRUE(std::isnan(f)) << std::hex << h;
        } else {
            ASSERT_EQ(static_cast<double>(f), expected) << std::hex << h;
            ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0) << std::hex << h;
        }
    }
}

TEST(Half, EveryHalfRoundTrips) {
    for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
        const std::uint16_t bits = static_cast<std::uint16_t>(h);
        const std::uint16_t back = float_to_half(half_to_float(bits));
        if (half_is_nan(bits)) {
            EXPECT_TRUE(half_is_nan(back)) << std::hex << h << " -> " << back;
            EXPECT_EQ(back & 0x8000u, bits & 0x8000u) << std::hex << h;
        } else {
            ASSERT_EQ(back, bits) << std::hex << h;
        }
    }
}

struct EdgeCase {
    float value;
    std::uint16_t expected;
    const char* what;
};

TEST(Half, EdgeCases) {
    const EdgeCase cases[] = {
        {0.0f, 0x0000, "zero"},
        {-0.0f, 0x8000, "negative zero keeps its sign"},
        {1.0f, 0x3c00, "one"},
        {-2.0f, 0xc000, "minus two"},
        {65504.0f, 0x7bff, "largest half"},
        {std::nextafter(65520.0f, 0.0f), 0x7bff, "just below the overflow midpoint"},
        {65520.0f, 0x7c00, "midpoint 65504/65536 ties to even: infinity"},
        {1.0e5f, 0x7c00, "overflow"},
        {-1.0e5f, 0xfc00, "negative overflow"},
        {std::numeric_limits<float>::max(), 0x7c00, "largest float"},
        {HUGE_VALF, 0x7c00, "infinity"},
        {-HUGE_VALF, 0xfc00, "negative infinity"},
        {0x1p-14f, 0x0400, "smallest normal half"},
        {0x1p-24f, 0x0001, "smallest subnormal half"},
        {0x1p-25f, 0x0000, "half the smallest subnormal ties to even: zero"},
        {-0x1p-25f, 0x8000, "and keeps the sign"},
        {std::nextafter(0x1p-25f, 1.0f), 0x0001, "just above it rounds up"},
        {3.0f * 0x1p-25f, 0x0002, "subnormal tie 1.5 quanta rounds to even 2"},
        {5.0f * 0x1p-25f, 0x0002, "subnormal tie 2.5 quanta rounds to even 2"},
        {1023.0f * 0x1p-24f, 0x03ff, "largest subnormal half"},
        {1023.5f * 0x1p-24f, 0x0400, "tie between largest subnormal and smallest normal"},
        {std::numeric_limits<float>::denorm_min(), 0x0000, "float subnormal underflows"},
        {-std::numeric_limits<float>::min(), 0x8000, "negative tiny underflows to -0"},
        {1.0f + 0x1p-11f, 0x3c00, "tie above one rounds down to even"},
        {1.0f + 3.0f * 0x1p-11f, 0x3c02, "tie above 1+2^-10 rounds up to even"},
        {1.0f + 0x1p-11f + 0x1p-23f, 0x3c01, "just above a tie rounds up"},
        {2049.0f, 0x6800, "integer tie rounds to even 2048"},
        {2051.0f, 0x6802, "integer tie rounds to even 2052"},
        {0.1f, 0x2e66, "0.1"},
        {1.0f / 3.0f, 0x3555, "1/3"},
    };
    for (const EdgeCase& c : cases) {
        EXPECT_EQ(float_to_half(c.value), c.expected) << c.what << " (" << c.value << ")";
        EXPECT_EQ(reference_half(c.value), c.expected) << "test's own reference: " << c.what;
    }
}

TEST(Half, NanStaysNan) {
    // A signalling NaN whose payload lies only in the bits a half drops must not become inf.
    for (std::uint32_t bits : {0x7fc00000u, 0x7f800001u, 0x7fa00000u, 0xffc00000u, 0xff800001u}) {
        const std::uint16_t h = float_to_half(from_bits(bits));
        EXPECT_TRUE(half_is_nan(h)) << std::hex << bits << " -> " << h;
        EXPECT_EQ((h & 0x8000u) != 0, (bits & 0x80000000u) != 0) << std::hex << bits;
    }
}

// Every midpoint between neighbouring halves (exact in float: 12 significant bits) goes to the
// one with an even mantissa; one float ulp either side goes to the nearer neighbour.
TEST(Half, MidpointsTieToEven) {
    for (std::uint32_t lo = 0; lo < 0x7bffu; ++lo) {
        const std::uint16_t a = static_cast<std::uint16_t>(lo), b = static_cast<std::uint16_t>(lo + 1);
        const float mid = (half_to_float(a) + half_to_float(b)) * 0.5f;
        ASSERT_EQ(static_cast<double>(mid), (decode(a) + decode(b)) / 2) << "midpoint not exact for " << lo;
        const std::uint16_t even = (a & 1u) ? b : a;
        for (std::uint16_t sign : {std::uint16_t{0}, std::uint16_t{0x8000}}) {
            const float s = sign ? -1.0f : 1.0f;
            ASSERT_EQ(float_to_half(s * mid), even | sign) << std::hex << lo;
            ASSERT_EQ(float_to_half(s * std::nextafter(mid, 0.0f)), a | sign) << std::hex << lo;
            ASSERT_EQ(float_to_half(s * std::nextafter(mid, HUGE_VALF)), b | sign) << std::hex << lo;
        }
    }
}

// Random floats, half of them near the half range, against the rounding done in double.
TEST(Half, MatchesIndependentRoundingOnRandomFloats) {
    ASSERT_EQ(std::fegetround(), FE_TONEAREST);
    std::mt19937 rng(51);
    std::size_t mismatches = 0;
    for (int n = 0; n < 2000000; ++n) {
        const std::uint32_t bits = random_float_bits(rng, n % 2 == 0);
        const float x = from_bits(bits);
        if (std::isnan(x)) continue;
        if (float_to_half(x) != reference_half(x) && mismatches++ < 10) {
            ADD_FAILURE() << "float bits " << std::hex << bits << ": " << float_to_half(x) << " vs "
                          << reference_half(x);
        }
    }
    EXPECT_EQ(mismatches, 0u);
}

#if defined(__x86_64__) || defined(__i386__)
// Compiled for F16C whatever this file's flags are: the AVX2 and AVX-512 kernels are, and run
// wherever the CPU has it.
__attribute__((target("f16c"))) std::uint16_t f16c_half(float x) {
    return static_cast<std::uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}
#endif

// The kernels store f16 weights with F16C where the CPU has it and with float_to_half
// otherwise: both must give the same bits for every non-NaN float.
TEST(Half, AgreesWithF16cHardware) {
#if defined(__x86_64__) || defined(__i386__)
    if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C";
    std::mt19937 rng(52);
    std::size_t mismatches = 0;
    for (int n = 0; n < 2000000; ++n) {
        const std::uint32_t bits = random_float_bits(rng, n % 2 == 0);
        const float x = from_bits(bits);
        if (std::isnan(x)) continue;
        if (float_to_half(x) != f16c_half(x) && mismatches++ < 10) {
            ADD_FAILURE() << "float bits " << std::hex << bits << ": " << float_to_half(x) << " vs F16C " << f16c_half(x);
        }
    }
    EXPECT_EQ(mismatches, 0u);
    for (std::uint32_t lo = 0; lo < 0x7bffu; ++lo) {
        const float mid = (half_to_float(static_cast<std::uint16_t>(lo)) + half_to_float(static_cast<std::uint16_t>(lo + 1))) * 0.5f;
        ASSERT_EQ(float_to_half(mid), f16c_half(mid)) << lo;
    }
#else
    GTEST_SKIP() << "F16C is an x86 extension";
#endif
}

}  // namespace
}  // namespace attnbatch::test
