// Counter-based random numbers for synthetic data. Every value is a pure function of (seed,
// stream, row, index), so a dataset can be written in slabs of any shape and in any order and
// still hold the same numbers: the content of a generated file never depends on how it was
// written (slab size, memory bound, a future parallel writer).
#pragma once

#include <cstdint>

namespace attnbatch::cli {

// The inverse of the standard normal CDF (Wichura's AS241, about 1e-16 relative error) for
// 0 < p < 1. One uniform in, one normal out: no pairing state as in Box-Muller.
double standard_normal_quantile(double p);

class RandomField {
public:
    // `stream` separates the independent quantities of one seed (embeddings, lengths, w_q...).
    RandomField(std::uint64_t seed, std::uint64_t stream);

    // The numbers of one row (a sequence, a row of a matrix): a SplitMix64 sequence whose
    // starting state is derived from the row, indexed directly rather than stepped.
    class Row {
    public:
        explicit Row(std::uint64_t key) : key_(key) {}
        std::uint64_t bits(std::uint64_t index) const;
        double uniform(std::uint64_t index) const;  // in (0, 1), never 0 or 1
        double normal(std::uint64_t index) const;   // standard normal
    private:
        std::uint64_t key_;
    };

    Row row(std::uint64_t row) const;

private:
    std::uint64_t key_;
};

}  // namespace attnbatch::cli
