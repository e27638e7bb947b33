// The one writer of projection-weights files: datasets first, in a fixed order, then the
// root attributes, so that the same content always makes the same bytes.
#include "attnbatch/io/models/weights_writer.hpp"

#include "attnbatch/io/h5/attribute.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "h5/slab_writer.hpp"

namespace attnbatch::io {
namespace {

double element_size(DataType type) { return type == DataType::float64 ? 8.0 : 4.0; }

}  // namespace

double weights_bytes(const WeightsContent& content) {
    const double kv_heads = static_cast<double>(content.kv_heads > 0 ? content.kv_heads : content.heads);
    const double qk = static_cast<double>(content.heads * content.d_k);
    const double kw = kv_heads * static_cast<double>(content.d_k), vw = kv_heads * static_cast<double>(content.d_v);
    const double v = static_cast<double>(content.heads * content.d_v);
    const double d = static_cast<double>(content.d), d_out = static_cast<double>(content.d_out);
    double elements = d * (qk + kw + vw);
    elements += (content.b_q ? qk : 0.0) + (content.b_k ? kw : 0.0) + (content.b_v ? vw : 0.0);
    if (content.w_o) elements += v * d_out + (content.b_o ? d_out : 0.0);
    return elements * element_size(content.dtype);
}

std::vector<WrittenDataset> write_weights(const File& file, const WeightsContent& content, const WeightsRecord& record,
                                          std::size_t slab_bytes) {
    const auto d = static_cast<std::uint64_t>(content.d);
    const bool stated = content.kv_heads > 0;
    const std::int64_t kv_heads = stated ? content.kv_heads : content.heads;
    const std::string kv = stated ? "G" : "H";
    const auto qk = static_cast<std::uint64_t>(content.heads * content.d_k);
    const auto kw = static_cast<std::uint64_t>(kv_heads * content.d_k);
    const auto vw = static_cast<std::uint64_t>(kv_heads * content.d_v);
    const auto v = static_cast<std::uint64_t>(content.heads * content.d_v);
    const auto d_out = static_cast<std::uint64_t>(content.d_out);
    const MemType type = content.dtype == DataType::float64 ? MemType::f64 : MemType::f32;
    std::vector<WrittenDataset> written;
    const auto write = [&](const char* path, const Dims& dims, const std::vector<std::string>& labels,
                           const ValueSource& values) {
        written.push_back(detail::write_computed_dataset(file, path, type, dims, labels, slab_bytes, values));
        const auto source = content.source_tensors.find(path);
        if (source != content.source_tensors.end()) {
            Dataset dataset = Dataset::open(file, path);
            set_text_attribute(dataset, attribute::source_tensor, source->second);
            dataset.close();
        }
    };
    write(dataset::w_q, {d, qk}, {"d", "H*d_k"}, content.w_q);
    write(dataset::w_k, {d, kw}, {"d", kv + "*d_k"}, content.w_k);
    write(dataset::w_v, {d, vw}, {"d", kv + "*d_v"}, content.w_v);
    if (content.w_o) write(dataset::w_o, {v, d_out}, {"H*d_v", "d_out"}, content.w_o);
    if (content.b_q) write(dataset::b_q, {qk}, {"H*d_k"}, content.b_q);
    if (content.b_k) write(dataset::b_k, {kw}, {kv + "*d_k"}, content.b_k);
    if (content.b_v) write(dataset::b_v, {vw}, {kv + "*d_v"}, content.b_v);
    if (content.w_o && content.b_o) write(dataset::b_o, {d_out}, {"d_out"}, content.b_o);

    set_text_attribute(file, attribute::format, format::weights);
    set_text_attribute(file, attribute::generator, record.generator);
    if (record.seed) set_int_attribute(file, attribute::seed, static_cast<std::int64_t>(*record.seed));
    set_int_attribute(file, attribute::heads, content.heads);
    set_text_attribute(file, attribute::dtype, name_of(content.dtype));
    if (stated) set_int_attribute(file, attribute::kv_heads, content.kv_heads);
    set_int_attribute(file, attribute::head_dim, content.d_k);
    set_int_attribute(file, attribute::value_dim, content.d_v);
    if (content.w_o) set_int_attribute(file, attribute::out_dim, content.d_out);
    if (const auto& import = record.import) {
        set_text_attribute(file, attribute::source, import->source);
        set_text_attribute(file, attribute::source_format, import->source_format);
        set_text_attribute(file, attribute::layer, import->layer);
        set_text_attribute(file, attribute::naming, import->naming);
        set_text_attribute(file, attribute::tensors, import->tensors);
        if (!import->model_type.empty()) set_text_attribute(file, attribute::model_type, import->model_type);
        if (import->rope_theta > 0) set_real_attribute(file, attribute::rope_theta, import->rope_theta);
    }
    return written;
}

}  // namespace attnbatch::io
