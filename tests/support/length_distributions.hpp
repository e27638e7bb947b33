// Length distributions for the planner's tests and its comparison program: truncated Zipf,
// uniform and constant lengths, from a seeded generator whose output does not depend on the
// standard library (no std::*_distribution).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace attnbatch::testing {

// Uniform in [0, 1) from 53 random bits.
inline double unit_interval(std::mt19937_64& rng) {
    return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// P(len = k) proportional to k^-exponent for k in 1..max_len, by inverse CDF.
inline std::vector<std::int32_t> zipf_lengths(std::int64_t n, std::int32_t max_len, double exponent,
                                              std::uint64_t seed) {
    std::vector<double> cdf(static_cast<std::size_t>(max_len));
    double sum = 0;
    for (std::int32_t k = 1; k <= max_len; ++k) {
        sum += std::pow(static_cast<double>(k), -exponent);
        cdf[static_cast<std::size_t>(k - 1)] = sum;
    }
    for (double& c : cdf) c /= sum;
    std::mt19937_64 rng(seed);
    std::vector<std::int32_t> lengths(static_cast<std::size_t>(n));
    for (std::int32_t& len : lengths) {
        const double u = unit_interval(rng);
        std::size_t lo = 0, hi = cdf.size() - 1;  // first k with cdf >= u
        while (lo < hi) {
            const std::size_t mid = (lo + hi) / 2;
            if (cdf[mid] < u) lo = mid + 1;
            else hi = mid;
        }
        len = static_cast<std::int32_t>(lo + 1);
    }
    return lengths;
}

// Uniform in lo..hi.
inline std::vector<std::int32_t> uniform_lengths(std::int64_t n, std::int32_t lo, std::int32_t hi, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::int32_t> lengths(static_cast<std::size_t>(n));
    const auto span = static_cast<std::uint64_t>(hi - lo + 1);
    for (std::int32_t& len : lengths) len = lo + static_cast<std::int32_t>(rng() % span);
    return lengths;
}

}  // namespace attnbatch::testing
