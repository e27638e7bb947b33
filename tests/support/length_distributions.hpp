// Length distributions for the planner's tests and its comparison program: truncated Zipf,
// Pareto (heavy-tailed), uniform and constant lengths, from a seeded generator whose output does not depend on the
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

// min(max_len, ceil(xm * U^(-1/alpha))), U uniform in (0, 1]: most sequences near xm, a tail
// up to max_len (tests/distributed/make_pareto_input.py draws the same law in numpy). With
// xm = 175, alpha = 1.5 and max_len = 16384 the mean is about 490 and the longest sequences,
// at max_len, over 30 times the mean.
inline std::vector<std::int32_t> pareto_lengths(std::int64_t n, std::int32_t max_len, double xm, double alpha,
                                                std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::int32_t> lengths(static_cast<std::size_t>(n));
    for (std::int32_t& len : lengths) {
        const double u = 1.0 - unit_interval(rng);
        const double draw = std::ceil(xm * std::pow(u, -1.0 / alpha));
        len = draw >= max_len ? max_len : static_cast<std::int32_t>(draw);
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
