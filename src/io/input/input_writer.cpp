// Writing an input file (and, through the weights writer, a projection weights file): datasets
// first, in a fixed order, then the root attributes, so that the same content always makes
// the same bytes.
#include "attnbatch/io/input/input_writer.hpp"

#include "attnbatch/io/h5/attribute.hpp"
#include "attnbatch/io/h5/chunking.hpp"
#include "attnbatch/io/h5/file.hpp"
#include "attnbatch/io/output/staged_file.hpp"
#include "h5/slab_writer.hpp"

#include <stdexcept>

namespace attnbatch::io {
namespace {

MemType mem_type_of(DataType type) { return type == DataType::float64 ? MemType::f64 : MemType::f32; }

void write_common_attributes(const File& file, const GeneratorRecord& record, const char* format_name,
                             std::int64_t heads, DataType dtype) {
    set_text_attribute(file, attribute::format, format_name);
    set_text_attribute(file, attribute::generator, record.generator);
    set_int_attribute(file, attribute::seed, static_cast<std::int64_t>(record.seed));
    set_int_attribute(file, attribute::heads, heads);
    set_text_attribute(file, attribute::dtype, name_of(dtype));
}

const char* layout_name(const InputContent& content) {
    if (content.mode == InputMode::embeddings) return "embeddings";
    return content.layout == QkvLayout::split ? "qkv-split" : "qkv-packed";
}

// The packed layout: [T, width] datasets and /offsets.
std::vector<WrittenDataset> write_packed(const File& file, const InputContent& content, std::size_t slab_bytes) {
    const auto tokens = static_cast<hsize_t>(content.offsets.back()), heads = static_cast<hsize_t>(content.heads);
    const MemType type = mem_type_of(content.dtype);
    std::vector<WrittenDataset> written;
    if (content.mode == InputMode::embeddings) {
        written.push_back(detail::write_computed_dataset(file, content.embeddings_path, type, {tokens, static_cast<hsize_t>(content.d)},
                                        {"T", "d"}, slab_bytes, content.embeddings));
    } else {
        const struct {
            const char* path;
            const ValueSource& values;
            std::int64_t head_width;
            const char* label;
        } tensors[] = {{dataset::query, content.query, content.d_k, "H*d_k"},
                       {dataset::key, content.key, content.d_k, "H*d_k"},
                       {dataset::value, content.value, content.d_v, "H*d_v"}};
        for (const auto& t : tensors) {
            written.push_back(detail::write_computed_dataset(file, t.path, type, {tokens, heads * static_cast<hsize_t>(t.head_width)},
                                            {"T", t.label}, slab_bytes, t.values));
        }
    }
    const auto count = static_cast<hsize_t>(content.offsets.size());
    DatasetCreation creation;
    creation.chunk = chunk_shape({count}, 8);
    Dataset offsets = Dataset::create(file, dataset::offsets, Datatype::int64(), {count}, creation);
    set_dimension_labels(offsets, {"N+1"});
    write_rows(offsets, 0, count, content.offsets.data(), content.offsets.size());
    offsets.close();
    written.push_back(WrittenDataset{dataset::offsets, "int64", {count}});
    return written;
}

std::vector<WrittenDataset> write_input(const File& file, const InputContent& content, const GeneratorRecord& record,
                                        std::size_t slab_bytes) {
    const auto n = static_cast<hsize_t>(content.n), len = static_cast<hsize_t>(content.len);
    const auto heads = static_cast<hsize_t>(content.heads);
    const MemType type = mem_type_of(content.dtype);
    std::vector<WrittenDataset> written;
    if (content.packed) {
        written = write_packed(file, content, slab_bytes);
    } else if (content.mode == InputMode::embeddings) {
        written.push_back(detail::write_computed_dataset(file, content.embeddings_path, type, {n, len, static_cast<hsize_t>(content.d)},
                                        {"N", "L", "d"}, slab_bytes, content.embeddings));
    } else {
        const bool split = content.layout == QkvLayout::split;
        const bool grouped = content.kv_heads > 0 && content.kv_heads != content.heads;
        const auto kv_heads = grouped ? static_cast<hsize_t>(content.kv_heads) : heads;
        const char* kv = grouped ? "G" : "H";
        const struct {
            const char* path;
            const ValueSource& values;
            std::int64_t head_width;
            const char* width_label;
            hsize_t heads;
            const char* heads_label;
        } tensors[] = {{dataset::query, content.query, content.d_k, "d_k", heads, "H"},
                       {dataset::key, content.key, content.d_k, "d_k", kv_heads, kv},
                       {dataset::value, content.value, content.d_v, "d_v", kv_heads, kv}};
        for (const auto& t : tensors) {
            const auto head_width = static_cast<hsize_t>(t.head_width);
            const Dims dims = split ? Dims{n, t.heads, len, head_width} : Dims{n, len, t.heads * head_width};
            const std::vector<std::string> labels =
                split ? std::vector<std::string>{"N", t.heads_label, "L", t.width_label}
                      : std::vector<std::string>{"N", "L", std::string(t.heads_label) + "*" + t.width_label};
            written.push_back(detail::write_computed_dataset(file, t.path, type, dims, labels, slab_bytes, t.values));
        }
    }
    if (content.lengths) {
        written.push_back(detail::write_computed_dataset(file, dataset::lengths, MemType::i32, {n}, {"N"}, slab_bytes, content.lengths));
    }
    write_common_attributes(file, record, format::input, content.heads, content.dtype);
    set_text_attribute(file, attribute::layout, layout_name(content));
    if (content.packed) set_text_attribute(file, attribute::sequence_layout, "packed");
    set_real_attribute(file, attribute::scale_values, record.scale_values);
    if (record.min_len) set_int_attribute(file, attribute::min_len, *record.min_len);
    if (content.mode == InputMode::qkv) {
        if (content.kv_heads > 0 && content.kv_heads != content.heads) set_int_attribute(file, attribute::kv_heads, content.kv_heads);
        set_int_attribute(file, attribute::head_dim, content.d_k);
        set_int_attribute(file, attribute::value_dim, content.d_v);
    }
    return written;
}

double element_size(DataType type) { return type == DataType::float64 ? 8.0 : 4.0; }

}  // namespace

double input_bytes(const InputContent& content) {
    const double kv_heads = static_cast<double>(content.kv_heads > 0 ? content.kv_heads : content.heads);
    const double width =
        content.mode == InputMode::qkv
            ? static_cast<double>(content.heads) * static_cast<double>(content.d_k) +
                  kv_heads * static_cast<double>(content.d_k + content.d_v)
            : static_cast<double>(content.d);
    if (content.packed) {
        return static_cast<double>(content.offsets.back()) * width * element_size(content.dtype) +
               8.0 * static_cast<double>(content.offsets.size());
    }
    return static_cast<double>(content.n) * static_cast<double>(content.len) * width * element_size(content.dtype) +
           (content.lengths ? 4.0 * static_cast<double>(content.n) : 0.0);
}

WrittenInput write_input_files(const InputDestination& destination, const InputContent& input,
                               const std::optional<WeightsContent>& weights, const GeneratorRecord& record) {
    if (weights && destination.weights_path.empty()) {
        throw std::invalid_argument("write_input_files: weights content without a weights path");
    }
    prepare_new_file(destination.option, destination.path, destination.force, input_bytes(input));
    if (weights) {
        prepare_new_file(destination.weights_option, destination.weights_path, destination.force,
                         weights_bytes(*weights));
    }
    StagedFile input_file(destination.path);
    std::optional<StagedFile> weights_file;
    if (weights) weights_file.emplace(destination.weights_path);
    WrittenInput written;
    {
        File file = input_file.create();
        written.input = write_input(file, input, record, destination.slab_bytes);
        file.close();
    }
    if (weights) {
        File file = weights_file->create();
        WeightsRecord made;
        made.generator = record.generator;
        made.seed = record.seed;
        written.weights = write_weights(file, *weights, made, destination.slab_bytes);
        file.close();
    }
    input_file.publish(destination.force);
    if (weights_file) weights_file->publish(destination.force);
    return written;
}

}  // namespace attnbatch::io
