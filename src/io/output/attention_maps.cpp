// Writing the attention maps of `weights`.
#include "attnbatch/io/output/attention_maps.hpp"

#include "attnbatch/io/h5/attribute.hpp"
#include "attnbatch/io/h5/dataset.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "attnbatch/io/output/staged_file.hpp"

#include <unistd.h>

#include <stdexcept>

namespace attnbatch::io {

void write_attention_maps(const std::string& path, const AttentionMaps& maps, bool force) {
    const auto len = static_cast<hsize_t>(maps.len);
    const Dims dims{maps.sequences.size(), maps.heads.size(), len, len};
    if (maps.values.size() != element_count(dims)) {
        throw std::invalid_argument("write_attention_maps: " + std::to_string(maps.values.size()) +
                                    " values for the shape " + shape_text(dims));
    }
    ::unlink(partial_path_for(path).c_str());  // an earlier attempt's, if any
    StagedFile staged(path);
    {
        File file = staged.create();
        Dataset attention = Dataset::create(file, dataset::attention, Datatype::float32(), dims);
        write_slab(attention, Slab{}, maps.values.data(), maps.values.size());
        set_int_array_attribute(attention, attribute::sequences, maps.sequences);
        set_int_array_attribute(attention, attribute::heads, maps.heads);
        set_text_attribute(file, attribute::format, format::attention_maps);
        set_text_attribute(file, attribute::source, maps.source);
        if (!maps.source_absolute.empty()) set_text_attribute(file, attribute::source_absolute, maps.source_absolute);
        attention.close();
        file.close();
    }
    staged.publish(force);
}

AttentionMapsCheck check_attention_maps(const std::string& file, const FileSchema& schema) {
    AttentionMapsCheck check;
    const auto problem = [&](const std::string& text) { check.problems.push_back(file + ": " + text); };
    const DatasetSchema* attention = schema.dataset(dataset::attention);
    if (!attention) {
        problem(std::string("dataset ") + dataset::attention + " is missing, expected float32 [S, H_sel, L, L]");
        return check;
    }
    if (attention->type.name() != "float32" || attention->dims.size() != 4 || attention->dims[2] != attention->dims[3]) {
        problem("dataset " + attention->path + " is " + attention->type.name() + " " + shape_text(attention->dims) +
                ", expected float32 [S, H_sel, L, L]");
        return check;
    }
    check.sequences = static_cast<std::int64_t>(attention->dims[0]);
    check.heads = static_cast<std::int64_t>(attention->dims[1]);
    check.len = static_cast<std::int64_t>(attention->dims[2]);
    const auto indices = [&](const char* name, std::int64_t count, std::vector<std::int64_t>& out) {
        const AttributeValue* value = attention->attribute(name);
        if (!value || value->kind != AttributeValue::Kind::integer ||
            static_cast<std::int64_t>(value->integers.size()) != count) {
            problem("dataset " + attention->path + ": attribute " + name + " should list the " + std::to_string(count) +
                    " indices of its axis (integers)");
            return;
        }
        out = value->integers;
    };
    indices(attribute::sequences, check.sequences, check.sequence_indices);
    indices(attribute::heads, check.heads, check.head_indices);
    return check;
}

}  // namespace attnbatch::io
