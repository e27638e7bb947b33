// Reading blocks of validated input as float32, and the projection weights.
#include "attnbatch/io/input_reader.hpp"

#include "attnbatch/io/h5_error.hpp"
#include "attnbatch/io/schema_names.hpp"
#include "input_files.hpp"

#include <algorithm>
#include <stdexcept>

namespace attnbatch::io {
namespace {

std::vector<Dataset> open_data(const File& file, const InputSpec& spec) {
    std::vector<Dataset> data;
    if (spec.mode == InputMode::embeddings) {
        data.push_back(Dataset::open(file, spec.dataset));
    } else {
        for (const std::string* path : {&spec.query, &spec.key, &spec.value}) data.push_back(Dataset::open(file, *path));
    }
    return data;
}

void read_sequences(const Dataset& dataset, std::int64_t first, std::int64_t count, std::vector<float>& out) {
    const Dims dims = dataset.dims();
    const std::size_t per_sequence = element_count(Dims(dims.begin() + 1, dims.end()));
    out.resize(per_sequence * static_cast<std::size_t>(count));
    const Slab rows = rows_slab(dataset, static_cast<hsize_t>(first), static_cast<hsize_t>(count));
    // float16 and bfloat16 data: half the bytes read, widened here (HDF5's conversion is slow).
    if (const std::optional<MemType> bits = dataset.type_info().half_width_bits()) {
        std::vector<std::uint16_t> narrow(out.size());
        read_slab(dataset, rows, *bits, narrow.data(), narrow.size());
        widen_half_width(*bits, narrow.data(), out.data(), out.size());
        return;
    }
    read_slab(dataset, rows, MemType::f32, out.data(), out.size());
}

}  // namespace

InputReader::InputReader(const InputSpec& spec, const FileAccess& access)
    : spec_(spec), file_(detail::open_input_file(spec.path, "--input", access)) {
    try {
        data_ = open_data(file_, spec_);
        if (!spec_.lengths.empty()) lengths_.emplace(Dataset::open(file_, spec_.lengths));
    } catch (const H5Error& error) {
        detail::rethrow_read_failure(error);
    }
}

void InputReader::read(std::int64_t first, std::int64_t last, InputBlock& block) {
    if (first < 0 || first > last || last > spec_.n) {
        throw std::invalid_argument("InputReader::read: sequences [" + std::to_string(first) + ", " +
                                    std::to_string(last) + ") outside [0, " + std::to_string(spec_.n) + ")");
    }
    block.first = first;
    block.count = last - first;
    try {
        if (spec_.mode == InputMode::embeddings) {
            read_sequences(data_[0], first, block.count, block.x);
        } else {
            read_sequences(data_[0], first, block.count, block.q);
            read_sequences(data_[1], first, block.count, block.k);
            read_sequences(data_[2], first, block.count, block.v);
        }
        block.lengths.resize(static_cast<std::size_t>(block.count));
        if (lengths_) {
            read_rows(*lengths_, static_cast<hsize_t>(first), static_cast<hsize_t>(block.count), block.lengths.data(),
                      block.lengths.size());
        } else {
            std::fill(block.lengths.begin(), block.lengths.end(), static_cast<std::int32_t>(spec_.len));
        }
    } catch (const H5Error& error) {
        detail::rethrow_read_failure(error);
    }
}

std::vector<std::int32_t> InputReader::read_all_lengths() {
    std::vector<std::int32_t> lengths(static_cast<std::size_t>(spec_.n), static_cast<std::int32_t>(spec_.len));
    if (!lengths_ || lengths.empty()) return lengths;
    try {
        read_rows(*lengths_, 0, static_cast<hsize_t>(spec_.n), lengths.data(), lengths.size());
    } catch (const H5Error& error) {
        detail::rethrow_read_failure(error);
    }
    return lengths;
}

ProjectionWeights read_weights(const WeightsSpec& spec, const FileAccess& access) {
    const File file = detail::open_input_file(spec.path, "--weights", access);
    ProjectionWeights weights;
    try {
        const auto load = [&](const char* path, bool present, std::vector<float>& out) {
            if (present) out = read_all<float>(Dataset::open(file, path));
        };
        load(dataset::w_q, true, weights.w_q);
        load(dataset::w_k, true, weights.w_k);
        load(dataset::w_v, true, weights.w_v);
        load(dataset::w_o, spec.has_w_o, weights.w_o);
        load(dataset::b_q, spec.has_b_q, weights.b_q);
        load(dataset::b_k, spec.has_b_k, weights.b_k);
        load(dataset::b_v, spec.has_b_v, weights.b_v);
        load(dataset::b_o, spec.has_b_o, weights.b_o);
    } catch (const H5Error& error) {
        detail::rethrow_read_failure(error);
    }
    return weights;
}

}  // namespace attnbatch::io
