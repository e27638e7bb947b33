// Telling an output, an input and a weights file apart by what they hold.
#include "attnbatch/io/h5/file_kind.hpp"

#include "attnbatch/io/h5/schema_names.hpp"

namespace attnbatch::io {

const char* name_of(FileKind kind) {
    switch (kind) {
        case FileKind::input: return "input";
        case FileKind::output: return "output";
        case FileKind::weights: return "weights";
        case FileKind::attention_maps: return "attention-maps";
        case FileKind::unknown: break;
    }
    return "unknown";
}

FileKind kind_of(const FileSchema& schema) {
    if (schema.dataset(dataset::output) || schema.dataset(dataset::lse)) return FileKind::output;
    if (schema.dataset(dataset::embeddings) || (schema.dataset(dataset::tokens) && schema.dataset(dataset::offsets)) ||
        (schema.dataset(dataset::query) && schema.dataset(dataset::key) && schema.dataset(dataset::value))) {
        return FileKind::input;
    }
    const AttributeValue* format_attribute = schema.attribute(attribute::format);
    if (format_attribute && format_attribute->text == format::output) return FileKind::output;
    if (format_attribute && format_attribute->text == format::input) return FileKind::input;
    if (format_attribute && format_attribute->text == format::attention_maps) return FileKind::attention_maps;
    if (schema.dataset(dataset::w_q) || schema.dataset(dataset::w_k) || schema.dataset(dataset::w_v)) {
        return FileKind::weights;
    }
    // Maps written before they carried `format`.
    if (schema.dataset(dataset::attention)) return FileKind::attention_maps;
    return FileKind::unknown;
}

}  // namespace attnbatch::io
