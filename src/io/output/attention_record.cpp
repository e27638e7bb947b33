#include "output/attention_record.hpp"

#include <optional>

#include "attnbatch/error.hpp"
#include "attnbatch/io/output/attention_fields.hpp"

namespace attnbatch::io {

namespace {

struct AttributeWriter {
    ObjectRef object;
    void operator()(const AttentionField& field, bool value, bool) const { set_int_attribute(object, field.attribute, value ? 1 : 0); }
    void operator()(const AttentionField& field, double value, double) const { set_real_attribute(object, field.attribute, value); }
    void operator()(const AttentionField& field, kernels::Precision value, kernels::Precision) const {
        set_text_attribute(object, field.attribute, kernels::precision_name(value));
    }
};

struct AttributeReader {
    ObjectRef object;
    const std::string& path;
    void operator()(const AttentionField& field, bool& value, bool) const {
        if (has_attribute(object, field.attribute)) value = get_int_attribute(object, field.attribute) != 0;
    }
    void operator()(const AttentionField& field, double& value, double) const {
        if (has_attribute(object, field.attribute)) value = get_real_attribute(object, field.attribute);
    }
    void operator()(const AttentionField& field, kernels::Precision& value, kernels::Precision) const {
        if (!has_attribute(object, field.attribute)) return;
        const std::string text = get_text_attribute(object, field.attribute);
        const std::optional<kernels::Precision> found = kernels::find_precision(text);
        if (!found) {
            throw Error(exit_invalid_input, path + ": root attribute " + field.attribute + " is '" + text +
                                                "', expected fp32 or bf16");
        }
        value = *found;
    }
};

}  // namespace

void write_attention_attributes(ObjectRef object, const kernels::AttentionSpec& spec) {
    for_each_attention_field(spec, AttributeWriter{object});
}

kernels::AttentionSpec read_attention_attributes(ObjectRef object, const std::string& path) {
    kernels::AttentionSpec spec;
    for_each_attention_field(spec, AttributeReader{object, path});
    return spec;
}

}  // namespace attnbatch::io
