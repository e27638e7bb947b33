// Reading blocks of validated input as float32.
#include "attnbatch/io/input/input_reader.hpp"

#include "attnbatch/error.hpp"
#include "attnbatch/io/h5/error.hpp"
#include "attnbatch/io/h5/scan.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "attnbatch/io/input/npy_shards.hpp"
#include "h5/open_checked.hpp"
#include "input/mapped_floats.hpp"
#include "input/read_buffer.hpp"

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace attnbatch::io {

// An HDF5 input's file and datasets, or .npy shards mapped in place.
struct InputReader::Files {
    std::optional<File> file;
    std::vector<Dataset> data;  // x, or q, k, v
    std::optional<Dataset> lengths;
    std::optional<NpyShardSet> npy;
    std::vector<std::int32_t> npy_lengths;  // padded shards with a lengths sidecar: every stored sequence's
    std::vector<std::optional<detail::MappedFloats>> in_place;  // beside data, with read_in_place
};

InputReader::InputReader(InputReader&&) noexcept = default;
InputReader& InputReader::operator=(InputReader&&) noexcept = default;
InputReader::~InputReader() = default;

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

// Whether every value is finite (and so within float32's range).
bool all_finite(const float* values, std::size_t count) { return all_within(values, count, FLT_MAX); }

bool all_finite(const std::vector<float>& values) { return all_finite(values.data(), values.size()); }

// Reads sequences [first, first + count) of `dataset` into `out`. With `scan`, returns whether
// every value read is finite, each piece checked as soon as it is read, while it is still in
// the L2 cache: a pass over the whole step afterwards read its megabytes back from memory, 16
// ms of the 0.3 s of rounds per rank at N=2048 L=256 (with the piece reads, about nothing).
bool read_sequences(const Dataset& dataset, std::int64_t first, std::int64_t count, std::vector<float>& out, bool scan) {
    constexpr std::size_t kScanPieceBytes = std::size_t{256} << 10;
    const Dims dims = dataset.dims();
    const std::size_t per_sequence = element_count(Dims(dims.begin() + 1, dims.end()));
    detail::size_for_read(out, per_sequence * static_cast<std::size_t>(count));
    // float16 and bfloat16 data: half the bytes read, widened here (HDF5's conversion is slow).
    const std::optional<MemType> bits = dataset.type_info().half_width_bits();
    const std::int64_t piece =
        scan ? std::max<std::int64_t>(1, static_cast<std::int64_t>(kScanPieceBytes / (per_sequence * sizeof(float)))) : count;
    std::vector<std::uint16_t> narrow;
    bool finite = true;
    for (std::int64_t done = 0; done < count; done += piece) {
        const std::int64_t n = std::min(piece, count - done);
        const Slab rows = rows_slab(dataset, static_cast<hsize_t>(first + done), static_cast<hsize_t>(n));
        float* into = out.data() + static_cast<std::size_t>(done) * per_sequence;
        const std::size_t elements = static_cast<std::size_t>(n) * per_sequence;
        if (bits) {
            narrow.resize(elements);
            read_slab(dataset, rows, *bits, narrow.data(), elements);
            widen_half_width(*bits, narrow.data(), into, elements);
        } else {
            read_slab(dataset, rows, MemType::f32, into, elements);
        }
        if (scan) finite = all_finite(into, elements) && finite;
    }
    return finite;
}

}  // namespace

void InputReader::expect_finite(const InputBlock& block, std::int64_t first, std::int64_t last) const {
    const std::vector<const std::vector<float>*> arrays =
        spec_.mode == InputMode::embeddings ? std::vector<const std::vector<float>*>{&block.x}
                                            : std::vector<const std::vector<float>*>{&block.q, &block.k, &block.v};
    for (std::size_t i = 0; i < arrays.size(); ++i) {
        if (!all_finite(*arrays[i])) throw_non_finite(i, first, last);
    }
}

void InputReader::throw_non_finite(std::size_t array, std::int64_t first, std::int64_t last) const {
    const std::string where = files_->npy ? spec_.path + " (.npy shards)" : spec_.path + ":" + files_->data[array].path();
    throw Error(exit_invalid_input, where + " has a non-finite value in sequences [" + std::to_string(spec_.first_sequence + first) +
                                        ", " + std::to_string(spec_.first_sequence + last) +
                                        "), expected finite values everywhere, padding included; hint: replace them, "
                                        "e.g. numpy.nan_to_num");
}

namespace {

// The block's rows read in place by the read before, done with now that it reads again.
void release_in_place(InputBlock& block) {
    for (InputBlock::InPlace* view : {&block.x_in_place, &block.q_in_place, &block.k_in_place, &block.v_in_place}) {
        if (view->data) detail::release_mapped_rows(view->data, view->count * sizeof(float));
        *view = InputBlock::InPlace{};
    }
}

}  // namespace

void InputBlock::copy_in_place() {
    for (auto [view, copy] : {std::pair{&x_in_place, &x}, std::pair{&q_in_place, &q}, std::pair{&k_in_place, &k}, std::pair{&v_in_place, &v}}) {
        if (view->data) copy->assign(view->data, view->data + view->count);
    }
    release_in_place(*this);
}

std::int64_t InputBlock::query_rows() const noexcept {
    if (!piece() || lengths.empty()) return 0;
    return std::max<std::int64_t>(0, std::min<std::int64_t>(row_last, lengths[0]) - row_first);
}

InputReader::InputReader(const InputSpec& spec, const FileAccess& access)
    : spec_(spec), files_(std::make_unique<Files>()) {
    if (spec_.npy()) {
        files_->npy.emplace(spec_);
        if (!spec_.packed && !spec_.lengths.empty()) files_->npy_lengths = npy_stored_lengths(spec_);
        if (spec_.packed) {
            const std::vector<std::int64_t> all = npy_stored_offsets(spec_);
            const auto first = all.begin() + static_cast<std::ptrdiff_t>(spec_.first_sequence);
            offsets_.assign(first, first + static_cast<std::ptrdiff_t>(spec_.n) + 1);
        }
        return;
    }
    files_->file.emplace(detail::open_input_file(spec.path, "--input", access));
    try {
        files_->data = open_data(*files_->file, spec_);
        if (!spec_.lengths.empty()) files_->lengths.emplace(Dataset::open(*files_->file, spec_.lengths));
        if (spec_.packed) {
            // Only the selected sequences' offsets (run --sequences), still in the file's rows.
            const std::vector<std::int64_t> all = read_all<std::int64_t>(Dataset::open(*files_->file, spec_.offsets));
            const auto first = all.begin() + static_cast<std::ptrdiff_t>(spec_.first_sequence);
            offsets_.assign(first, first + static_cast<std::ptrdiff_t>(spec_.n) + 1);
        }
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
    release_in_place(block);
    const std::int64_t stored = spec_.first_sequence + first;  // the row in the file
    block.row_first = block.row_last = block.key_rows = 0;
    block.offsets.clear();
    if (spec_.packed) {
        read_packed(first, last, block);
        return;
    }
    read_data(stored, block.count, first, last, block);
    block.lengths.resize(static_cast<std::size_t>(block.count));
    if (files_->npy) {
        for (std::int64_t i = 0; i < block.count; ++i) block.lengths[static_cast<std::size_t>(i)] = length_of(first + i);
        return;
    }
    try {
        if (files_->lengths) {
            read_rows(*files_->lengths, static_cast<hsize_t>(stored), static_cast<hsize_t>(block.count), block.lengths.data(),
                      block.lengths.size());
        } else {
            std::fill(block.lengths.begin(), block.lengths.end(), static_cast<std::int32_t>(spec_.len));
        }
    } catch (const H5Error& error) {
        detail::rethrow_read_failure(error);
    }
}

void InputReader::read_data(std::int64_t row, std::int64_t rows, std::int64_t first, std::int64_t last, InputBlock& block) {
    if (files_->npy) {
        const float* rows_in_place = npy_in_place_ ? files_->npy->rows_in_place(row, rows) : nullptr;
        if (rows_in_place) {
            const auto count = static_cast<std::size_t>(rows * files_->npy->row_width());
            detail::populate_mapped_rows(rows_in_place, count * sizeof(float));
            block.x_in_place = InputBlock::InPlace{rows_in_place, count};
            if (check_values_ && !all_finite(rows_in_place, count)) throw_non_finite(0, first, last);
            return;
        }
        files_->npy->read_rows(row, rows, block.x);
        if (check_values_) expect_finite(block, first, last);
        return;
    }
    bool finite[3] = {true, true, true};  // x, or q, k, v
    const bool embeddings = spec_.mode == InputMode::embeddings;
    std::vector<float>* const copies[3] = {embeddings ? &block.x : &block.q, &block.k, &block.v};
    InputBlock::InPlace* const in_place[3] = {embeddings ? &block.x_in_place : &block.q_in_place, &block.k_in_place, &block.v_in_place};
    try {
        for (std::size_t i = 0; i < files_->data.size(); ++i) {
            if (i < files_->in_place.size() && files_->in_place[i]) {
                const detail::MappedFloats& mapped = *files_->in_place[i];
                const auto count = static_cast<std::uint64_t>(rows) * mapped.row_elements();
                *in_place[i] = InputBlock::InPlace{mapped.elements(static_cast<std::uint64_t>(row) * mapped.row_elements(), count),
                                                   static_cast<std::size_t>(count)};
                if (check_values_) finite[i] = all_finite(in_place[i]->data, in_place[i]->count);
            } else {
                finite[i] = read_sequences(files_->data[i], row, rows, *copies[i], check_values_);
            }
        }
    } catch (const H5Error& error) {
        detail::rethrow_read_failure(error);
    }
    for (std::size_t i = 0; i < 3; ++i) {
        if (!finite[i]) throw_non_finite(i, first, last);
    }
}

void InputReader::read_in_place(bool on) {
    files_->in_place.clear();
    npy_in_place_ = on && files_->npy;
    if (!on || files_->npy) return;
    try {
        for (const Dataset& dataset : files_->data) files_->in_place.push_back(detail::MappedFloats::of(spec_.path, dataset));
    } catch (const H5Error& error) {
        detail::rethrow_read_failure(error);
    }
}

std::vector<std::int32_t> InputReader::read_all_lengths() {
    if (spec_.packed) {
        std::vector<std::int32_t> lengths(static_cast<std::size_t>(spec_.n));
        for (std::size_t i = 0; i < lengths.size(); ++i) lengths[i] = static_cast<std::int32_t>(offsets_[i + 1] - offsets_[i]);
        return lengths;
    }
    std::vector<std::int32_t> lengths(static_cast<std::size_t>(spec_.n), static_cast<std::int32_t>(spec_.len));
    if (!files_->npy_lengths.empty()) {
        const auto first = files_->npy_lengths.begin() + static_cast<std::ptrdiff_t>(spec_.first_sequence);
        std::copy(first, first + static_cast<std::ptrdiff_t>(spec_.n), lengths.begin());
    }
    if (!files_->lengths || lengths.empty()) return lengths;
    try {
        read_rows(*files_->lengths, static_cast<hsize_t>(spec_.first_sequence), static_cast<hsize_t>(spec_.n), lengths.data(),
                  lengths.size());
    } catch (const H5Error& error) {
        detail::rethrow_read_failure(error);
    }
    return lengths;
}

std::int32_t InputReader::length_of(std::int64_t sequence) {
    if (spec_.packed) return static_cast<std::int32_t>(offsets_[static_cast<std::size_t>(sequence) + 1] - offsets_[static_cast<std::size_t>(sequence)]);
    if (!files_->npy_lengths.empty()) return files_->npy_lengths[static_cast<std::size_t>(spec_.first_sequence + sequence)];
    if (!files_->lengths) return static_cast<std::int32_t>(spec_.len);
    std::int32_t length = 0;
    read_rows(*files_->lengths, static_cast<hsize_t>(spec_.first_sequence + sequence), 1, &length, 1);
    return length;
}

void InputReader::read_packed(std::int64_t first, std::int64_t last, InputBlock& block) {
    const std::int64_t begin = offsets_[static_cast<std::size_t>(first)], end = offsets_[static_cast<std::size_t>(last)];
    block.offsets.resize(static_cast<std::size_t>(block.count) + 1);
    block.lengths.resize(static_cast<std::size_t>(block.count));
    for (std::int64_t i = 0; i <= block.count; ++i) {
        block.offsets[static_cast<std::size_t>(i)] = offsets_[static_cast<std::size_t>(first + i)] - begin;
        if (i < block.count) {
            block.lengths[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(offsets_[static_cast<std::size_t>(first + i) + 1] -
                                                                                 offsets_[static_cast<std::size_t>(first + i)]);
        }
    }
    read_data(begin, end - begin, first, last, block);
}

void InputReader::read_piece(std::int64_t sequence, std::int64_t row_first, std::int64_t row_last, std::int64_t key_rows,
                             InputBlock& block) {
    if (sequence < 0 || sequence >= spec_.n || row_first < 0 || row_last <= row_first || key_rows < 0) {
        throw std::invalid_argument("InputReader::read_piece: sequence " + std::to_string(sequence) + " rows [" +
                                    std::to_string(row_first) + ", " + std::to_string(row_last) + ") keys " +
                                    std::to_string(key_rows) + " out of range");
    }
    block.first = sequence;
    block.count = 1;
    block.offsets.clear();
    release_in_place(block);
    block.row_first = row_first;
    block.row_last = row_last;
    try {
        const std::int32_t length = length_of(sequence);
        block.lengths.assign(1, length);
        block.key_rows = std::min<std::int64_t>(key_rows, length);
        const std::int64_t query_end = std::max(row_first, std::min<std::int64_t>(row_last, length));
        // Rows [begin, end) of one sequence, every other axis whole: a box of [N, L, w],
        // [N, H, L, d] or, packed, rows of [T, w].
        const auto read_rows_of = [&](const Dataset& dataset, std::int64_t begin, std::int64_t end, std::vector<float>& out) {
            const Dims dims = dataset.dims();
            Slab slab{Dims(dims.size(), 0), dims};
            if (spec_.packed) {
                slab.offset[0] = static_cast<hsize_t>(offsets_[static_cast<std::size_t>(sequence)] + begin);
                slab.count[0] = static_cast<hsize_t>(end - begin);
            } else {
                const std::size_t row_axis = dims.size() == 4 ? 2 : 1;
                slab.offset[0] = static_cast<hsize_t>(spec_.first_sequence + sequence);
                slab.count[0] = 1;
                slab.offset[row_axis] = static_cast<hsize_t>(begin);
                slab.count[row_axis] = static_cast<hsize_t>(end - begin);
            }
            detail::size_for_read(out, element_count(slab.count));
            read_slab(dataset, slab, out.data(), out.size());
        };
        if (files_->npy) {  // rows [0, key_rows) of the sequence: consecutive elements of the shards
            const std::int64_t d = spec_.d;
            const std::int64_t row = spec_.packed ? offsets_[static_cast<std::size_t>(sequence)]
                                                  : (spec_.first_sequence + sequence) * spec_.len;
            detail::size_for_read(block.x, static_cast<std::size_t>(block.key_rows * d));
            files_->npy->read_elements(row * d, block.key_rows * d, block.x.data());
        } else if (spec_.mode == InputMode::embeddings) {
            read_rows_of(files_->data[0], 0, block.key_rows, block.x);
        } else {
            read_rows_of(files_->data[0], row_first, query_end, block.q);
            read_rows_of(files_->data[1], 0, block.key_rows, block.k);
            read_rows_of(files_->data[2], 0, block.key_rows, block.v);
        }
    } catch (const H5Error& error) {
        detail::rethrow_read_failure(error);
    }
}

}  // namespace attnbatch::io
