// Reading an output back: its layout from its datasets, what the run recorded, and rows.
#include "attnbatch/io/output/output_reader.hpp"

#include "attnbatch/io/h5/attribute.hpp"
#include "attnbatch/io/h5/dataset.hpp"
#include "attnbatch/io/h5/file.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "output/attention_record.hpp"

#include <algorithm>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace attnbatch::io {

struct OutputReader::Datasets {
    explicit Datasets(File opened) : file(std::move(opened)) {}
    File file;
    std::optional<Dataset> output, lse, lengths, attention, offsets;
};

OutputReader::OutputReader(OutputReader&&) noexcept = default;
OutputReader& OutputReader::operator=(OutputReader&&) noexcept = default;
OutputReader::~OutputReader() = default;

namespace {

std::optional<Dataset> open_if_present(const File& file, const char* path) {
    if (object_kind(file, path) != ObjectKind::dataset) return std::nullopt;
    return Dataset::open(file, path);
}

std::string range_text(std::int64_t first, std::int64_t last) {
    return "[" + std::to_string(first) + ", " + std::to_string(last) + ")";
}

// Rows [first, first + count) of the leading axis, every other axis whole, into `out`.
template <class T>
void read_sequences(const Dataset& dataset, std::int64_t first, std::int64_t count, std::vector<T>& out) {
    const Dims dims = dataset.dims();
    const std::size_t per_sequence = element_count(Dims(dims.begin() + 1, dims.end()));
    out.resize(per_sequence * static_cast<std::size_t>(count));
    read_rows(dataset, static_cast<hsize_t>(first), static_cast<hsize_t>(count), out.data(), out.size());
}

}  // namespace

OutputReader::OutputReader(const std::string& path, const FileAccess& access)
    : h5_(std::make_unique<Datasets>(File::open(path, FileMode::read_only, access))), path_(path) {
    complete_ = has_attribute(h5_->file, attribute::complete) && get_int_attribute(h5_->file, attribute::complete) == 1;
    h5_->output = open_if_present(h5_->file, dataset::output);
    h5_->lse = open_if_present(h5_->file, dataset::lse);
    h5_->lengths = open_if_present(h5_->file, dataset::lengths);
    h5_->attention = open_if_present(h5_->file, dataset::attention);
    has_attention_ = h5_->attention.has_value();
    const auto extent = [](const Dims& dims, std::size_t axis) { return static_cast<std::int64_t>(dims[axis]); };
    if (h5_->output) {
        const Dims dims = h5_->output->dims();
        if (dims.size() == 3) {
            layout_.n = extent(dims, 0);
            layout_.len = extent(dims, 1);
            layout_.d_out = extent(dims, 2);
        }
    }
    h5_->offsets = open_if_present(h5_->file, dataset::offsets);
    if (h5_->offsets && h5_->output && h5_->output->dims().size() == 2) {
        const auto offsets = std::make_shared<std::vector<std::int64_t>>(read_all<std::int64_t>(*h5_->offsets));
        layout_.packed = true;
        layout_.offsets = offsets;
        layout_.n = static_cast<std::int64_t>(offsets->size()) - 1;
        layout_.d_out = extent(h5_->output->dims(), 1);
        std::int64_t longest = 1;
        for (std::size_t s = 1; s < offsets->size(); ++s) longest = std::max(longest, (*offsets)[s] - (*offsets)[s - 1]);
        layout_.len = longest;
        if (h5_->lse && h5_->lse->dims().size() == 2) layout_.heads = extent(h5_->lse->dims(), 0);
        if (h5_->attention && h5_->attention->dims().size() == 4) layout_.len = extent(h5_->attention->dims(), 2);
    }
    if (h5_->lse && !layout_.packed) {
        const Dims dims = h5_->lse->dims();
        if (dims.size() == 3) {
            layout_.heads = extent(dims, 1);
            if (!h5_->output) {
                layout_.n = extent(dims, 0);
                layout_.len = extent(dims, 2);
            }
        }
    }
    if (has_attribute(h5_->file, attribute::first_sequence)) layout_.first_sequence = get_int_attribute(h5_->file, attribute::first_sequence);
    layout_.save_weights = SaveWeights::none;
    if (h5_->attention) {
        const Dims dims = h5_->attention->dims();
        if (dims.size() == 4) {
            layout_.weights_dtype = h5_->attention->type_info().size == 2 ? WeightsDtype::f16 : WeightsDtype::f32;
            // Recorded as an input sequence; the layout counts rows.
            layout_.weights_first = has_attribute(*h5_->attention, attribute::first_sequence)
                                        ? get_int_attribute(*h5_->attention, attribute::first_sequence) - layout_.first_sequence
                                        : 0;
            layout_.weights_last = layout_.weights_first + extent(dims, 0);
            // Packed outputs of earlier versions recorded the output's own row there, from 0.
            if (layout_.weights_first < 0 || (layout_.n > 0 && layout_.weights_last > layout_.n)) {
                throw Error(exit_invalid_input,
                            path + ": dataset " + dataset::attention + " has " + attribute::first_sequence + " = " +
                                std::to_string(layout_.first_sequence + layout_.weights_first) + " for " +
                                std::to_string(extent(dims, 0)) + " sequences, expected its maps within the output's sequences [" +
                                std::to_string(layout_.first_sequence) + ", " + std::to_string(layout_.first_sequence + layout_.n) +
                                "); hint: set it to the input's number of the maps' first sequence (h5py: f[\"attention\"].attrs[\"first_sequence\"])");
            }
            const bool mean = has_attribute(*h5_->attention, attribute::mean_over_heads)
                                  ? get_int_attribute(*h5_->attention, attribute::mean_over_heads) == 1
                                  : dims[1] == 1 && layout_.heads > 1;
            layout_.save_weights = mean ? SaveWeights::mean : SaveWeights::all;
        }
    }
}

Provenance OutputReader::provenance() const {
    Provenance provenance;
    const auto text = [&](const char* name, std::string& value) {
        if (has_attribute(h5_->file, name)) value = get_text_attribute(h5_->file, name);
    };
    const auto integer = [&](const char* name, std::int64_t& value) {
        if (has_attribute(h5_->file, name)) value = get_int_attribute(h5_->file, name);
    };
    text(attribute::version, provenance.version);
    text(attribute::creation_time, provenance.creation_time);
    text(attribute::input_file, provenance.input_file);
    text(attribute::input_file_absolute, provenance.input_file_absolute);
    text(attribute::weights_file, provenance.weights_file);
    text(attribute::weights_file_absolute, provenance.weights_file_absolute);
    text(attribute::input_dataset, provenance.input_dataset);
    integer(attribute::heads, provenance.heads);
    integer(attribute::kv_heads, provenance.kv_heads);
    integer(attribute::d_k, provenance.d_k);
    integer(attribute::d_v, provenance.d_v);
    provenance.attention = read_attention_attributes(h5_->file, path());
    integer(attribute::ranks, provenance.ranks);
    integer(attribute::threads, provenance.threads);
    text(attribute::io_mode, provenance.io_mode);
    provenance.config = config();
    return provenance;
}

std::string OutputReader::config() const {
    // Without it the run's options are unknown: a file that is no (whole) output of run, which
    // is the file's fault, not a read failure.
    if (object_kind(h5_->file, dataset::config) != ObjectKind::dataset) {
        throw Error(exit_invalid_input, path_ + ": no dataset " + dataset::config +
                                            ", expected the run's resolved configuration (a scalar string) that every "
                                            "output of attnbatch run records; hint: is this an output of attnbatch run?");
    }
    return read_text_dataset(h5_->file, dataset::config);
}

std::map<std::string, std::string> OutputReader::recorded_options() const { return parse_recorded_options(config()); }

std::map<std::string, std::string> parse_recorded_options(const std::string& config) {
    std::map<std::string, std::string> values;
    std::istringstream in(config);
    std::string line;
    while (std::getline(in, line)) {
        const auto eq = line.find(" = ");
        if (eq == std::string::npos) continue;
        std::string value = line.substr(eq + 3);
        const auto comment = value.find("  # default");
        if (comment != std::string::npos) value.erase(comment);
        values[line.substr(0, eq)] = value;
    }
    return values;
}

std::vector<std::string> recorded_options_problems(const std::map<std::string, std::string>& options,
                                                   std::optional<WeightsDtype> maps) {
    std::vector<std::string> problems;
    const auto recorded = [&](const char* name, const std::string& expected) {
        problems.push_back(std::string(dataset::config) + " records " + name + " = " + options.at(name) + ", expected " + expected);
    };
    for (const char* name : {"heads", "kv-heads"}) {
        if (!options.count(name)) continue;
        const std::string& value = options.at(name);
        const bool digits = !value.empty() && value.size() <= 9 && value.find_first_not_of("0123456789") == std::string::npos;
        if (!digits || std::stoi(value) < 1) recorded(name, "a positive integer");
    }
    if (options.count("save-weights")) {
        const std::string& save = options.at("save-weights");
        if (save != "none" && save != "all" && save != "mean") recorded("save-weights", "none, all or mean");
    }
    if (options.count("weights-dtype")) {
        const std::string& dtype = options.at("weights-dtype");
        if (dtype != name_of(WeightsDtype::f32) && dtype != name_of(WeightsDtype::f16)) {
            recorded("weights-dtype", "f32 or f16");
        } else if (maps && dtype != name_of(*maps)) {
            recorded("weights-dtype", std::string(name_of(*maps)) + ", the dtype of the maps " + dataset::attention + " holds (" +
                                          (*maps == WeightsDtype::f16 ? "float16" : "float32") + ")");
        }
    }
    return problems;
}

namespace {

const Dataset& require(const std::optional<Dataset>& dataset, const std::string& file, const char* path) {
    if (!dataset) {
        throw Error(exit_invalid_input, file + ": dataset " + path + " is missing; expected an output of attnbatch run");
    }
    return *dataset;
}

}  // namespace

void OutputReader::read_output(std::int64_t first, std::int64_t last, std::vector<float>& out) const {
    const Dataset& output = require(h5_->output, path_, dataset::output);
    if (first < 0 || first > last || last > layout_.n) {
        throw std::invalid_argument("OutputReader: sequences " + range_text(first, last) + " outside " +
                                    range_text(0, layout_.n));
    }
    if (layout_.packed) {
        const std::int64_t begin = (*layout_.offsets)[static_cast<std::size_t>(first)];
        return read_sequences(output, begin, (*layout_.offsets)[static_cast<std::size_t>(last)] - begin, out);
    }
    read_sequences(output, first, last - first, out);
}

void OutputReader::read_lse(std::int64_t first, std::int64_t last, std::vector<float>& out) const {
    const Dataset& lse = require(h5_->lse, path_, dataset::lse);
    if (first < 0 || first > last || last > layout_.n) {
        throw std::invalid_argument("OutputReader: sequences " + range_text(first, last) + " outside " +
                                    range_text(0, layout_.n));
    }
    if (layout_.packed) {  // [H, T]: the columns of these sequences' rows
        const auto begin = static_cast<hsize_t>((*layout_.offsets)[static_cast<std::size_t>(first)]);
        const auto rows = static_cast<hsize_t>((*layout_.offsets)[static_cast<std::size_t>(last)]) - begin;
        const Slab slab{{0, begin}, {static_cast<hsize_t>(layout_.heads), rows}};
        out.resize(element_count(slab.count));
        return read_slab(lse, slab, out.data(), out.size());
    }
    read_sequences(lse, first, last - first, out);
}

void OutputReader::read_lengths(std::int64_t first, std::int64_t last, std::vector<std::int32_t>& out) const {
    const Dataset& lengths = require(h5_->lengths, path_, dataset::lengths);
    if (first < 0 || first > last || last > layout_.n) {
        throw std::invalid_argument("OutputReader: sequences " + range_text(first, last) + " outside " +
                                    range_text(0, layout_.n));
    }
    read_sequences(lengths, first, last - first, out);
}

namespace {

template <class T>
void read_map_rows(const Dataset& attention, const OutputLayout& layout, std::int64_t first, std::int64_t last,
                       std::vector<T>& out) {
    if (first < layout.weights_first || first > last || last > layout.weights_end()) {
        throw std::invalid_argument("OutputReader: sequences " + range_text(first, last) +
                                    " outside the stored attention maps " +
                                    range_text(layout.weights_first, layout.weights_end()));
    }
    read_sequences(attention, first - layout.weights_first, last - first, out);
}

}  // namespace

void OutputReader::read_attention(std::int64_t first, std::int64_t last, std::vector<float>& out) const {
    read_map_rows(require(h5_->attention, path_, dataset::attention), layout_, first, last, out);
}

void OutputReader::read_attention(std::int64_t first, std::int64_t last, std::vector<std::uint16_t>& out) const {
    const Dataset& attention = require(h5_->attention, path_, dataset::attention);
    if (layout_.weights_dtype != WeightsDtype::f16) {
        throw std::invalid_argument("OutputReader: " + h5_->file.path() + ":" + attention.path() +
                                    " holds float32 attention maps, not float16 bits");
    }
    read_map_rows(attention, layout_, first, last, out);
}

void OutputReader::read(std::int64_t first, std::int64_t last, OutputRows& rows) const {
    read_output(first, last, rows.output);
    read_lse(first, last, rows.lse);
    read_lengths(first, last, rows.lengths);
    rows.first = first;
    rows.count = last - first;
    rows.attention.clear();
    rows.attention_f16.clear();
    const auto [begin, end] = layout_.weights_range(first, last);
    if (end <= begin) return;
    if (layout_.weights_dtype == WeightsDtype::f16) {
        read_attention(begin, end, rows.attention_f16);
    } else {
        read_attention(begin, end, rows.attention);
    }
}

}  // namespace attnbatch::io
