// The finiteness scan over an input describe_input() accepted: every value of the data and of
// the projection weights must be finite and within float32's range (everything is computed
// in float32). A scanner opens the input, and the weights file, once, when first needed, and
// then scans any slices of the sequences: a caller that scans in bounded slices (a
// distributed run, each rank its share) reads the files without reopening them per slice.
// Error (exit 3) names the first bad value: file, dataset, index and value; exit 4 when a
// file cannot be read.
#pragma once

#include "attnbatch/io/h5/scan.hpp"
#include "attnbatch/io/input/input_spec.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace attnbatch::io {

class ValueScanner {
public:
    // `max_bytes` bounds the memory of each read.
    explicit ValueScanner(const InputSpec& spec, std::size_t max_bytes = default_scan_bytes);
    ValueScanner(ValueScanner&&) noexcept;
    ValueScanner& operator=(ValueScanner&&) noexcept;
    ~ValueScanner();

    // Sequences [first, last) of the selection (counted from spec.first_sequence, as every
    // index of InputSpec is), every data dataset in turn.
    void scan_sequences(std::int64_t first, std::int64_t last);
    // Every matrix and bias of the projection weights; nothing without them.
    void scan_weights();

private:
    struct Files;  // what has been opened so far
    InputSpec spec_;
    std::size_t max_bytes_;
    std::unique_ptr<Files> files_;
    void scan_npy_sequences(std::int64_t first, std::int64_t last);
};

}  // namespace attnbatch::io
