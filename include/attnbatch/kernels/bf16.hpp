// bfloat16 (the upper half of an IEEE binary32: 8 exponent bits, 7 mantissa bits) conversions in
// software, round to nearest even: what VCVTNEPS2BF16 does to finite values of normal size.
#pragma once

#include <cstdint>
#include <cstring>

namespace attnbatch::kernels {

inline std::uint16_t float_to_bf16(float value) {
    std::uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<std::uint16_t>(bits >> 16);
}

inline float bf16_to_float(std::uint16_t bits) {
    const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &wide, sizeof value);
    return value;
}

inline float round_to_bf16(float value) { return bf16_to_float(float_to_bf16(value)); }

}  // namespace attnbatch::kernels
