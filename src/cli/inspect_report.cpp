// Rendering an inspect report: aligned text for people, one JSON object for scripts.
#include "inspect_report.hpp"

#include "json_writer.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>

namespace attnbatch::cli {
namespace {

using io::AttributeValue;
using io::DatasetSchema;
using io::FileSchema;

// A dataset's or an attribute's shape; a scalar has none.
std::string shape_text(const io::Dims& dims) { return dims.empty() ? "scalar" : io::shape_text(dims); }

std::string join(const std::vector<std::string>& items, const char* separator) {
    std::string text;
    for (std::size_t i = 0; i < items.size(); ++i) text += (i ? separator : "") + items[i];
    return text;
}

std::string number_text(double value) {
    char buffer[32];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
    return std::string(buffer, result.ptr);
}

std::string attribute_text(const AttributeValue& attribute) {
    const auto list = [&](std::size_t count, auto item) {
        if (attribute.shape.empty() && count == 1) return item(0);
        std::string text = "[";
        for (std::size_t i = 0; i < count && i < 8; ++i) text += (i ? ", " : "") + item(i);
        return text + (count > 8 ? ", ... (" + std::to_string(count) + " values)]" : "]");
    };
    switch (attribute.kind) {
        case AttributeValue::Kind::integer:
            return list(attribute.integers.size(), [&](std::size_t i) { return std::to_string(attribute.integers[i]); });
        case AttributeValue::Kind::real:
            return list(attribute.reals.size(), [&](std::size_t i) { return number_text(attribute.reals[i]); });
        case AttributeValue::Kind::text: {
            constexpr std::size_t shown = 100;
            if (attribute.text.size() <= shown) return json_quote(attribute.text);
            return json_quote(attribute.text.substr(0, shown)) + "... (" + std::to_string(attribute.text.size()) + " chars)";
        }
        case AttributeValue::Kind::other: break;
    }
    return "<" + attribute.type + " " + shape_text(attribute.shape) + ">";
}

void print_schema(std::ostream& out, const InspectReport& report) {
    const FileSchema& schema = *report.schema;
    out << report.path << ": HDF5, " << schema.datasets.size() << " dataset(s)";
    if (!schema.groups.empty()) out << ", groups " << join(schema.groups, ", ");
    out << '\n';
    const auto layout_text = [](const DatasetSchema& d) {
        return d.chunk.empty() ? std::string("contiguous") : "chunks " + shape_text(d.chunk);
    };
    std::size_t path_width = 0, type_width = 0, shape_width = 0, layout_width = 0;
    for (const DatasetSchema& d : schema.datasets) {
        path_width = std::max(path_width, d.path.size());
        type_width = std::max(type_width, d.type.name().size());
        shape_width = std::max(shape_width, shape_text(d.dims).size());
        layout_width = std::max(layout_width, layout_text(d).size());
    }
    for (const DatasetSchema& d : schema.datasets) {
        std::ostringstream line;
        line << "  " << std::left;
        line.width(static_cast<std::streamsize>(path_width + 2));
        line << d.path;
        line.width(static_cast<std::streamsize>(type_width + 2));
        line << d.type.name();
        line.width(static_cast<std::streamsize>(shape_width + 2));
        line << shape_text(d.dims);
        line.width(static_cast<std::streamsize>(layout_width + 2));
        line << layout_text(d);
        if (!d.filters.empty()) line << "filters " << join(d.filters, "+") << "  ";
        const auto any = [](const std::vector<std::string>& names) {
            return std::any_of(names.begin(), names.end(), [](const std::string& n) { return !n.empty(); });
        };
        if (any(d.labels)) line << "labels (" << join(d.labels, ", ") << ")";
        if (any(d.scales)) line << (any(d.labels) ? "  " : "") << "dims (" << join(d.scales, ", ") << ")";
        if (d.is_dimension_scale) line << "dimension scale";
        std::string text = line.str();
        text.erase(text.find_last_not_of(' ') + 1);
        out << text << '\n';
        for (const AttributeValue& a : d.attributes) out << "      @" << a.name << " = " << attribute_text(a) << '\n';
    }
    if (!schema.attributes.empty()) out << "  root attributes:\n";
    for (const AttributeValue& a : schema.attributes) out << "    " << a.name << " = " << attribute_text(a) << '\n';
}

void write_attributes(JsonWriter& json, const std::vector<AttributeValue>& attributes) {
    json.begin_object();
    for (const AttributeValue& a : attributes) {
        json.key(a.name);
        const bool scalar = a.shape.empty();
        switch (a.kind) {
            case AttributeValue::Kind::integer:
                if (scalar && a.integers.size() == 1) {
                    json.value(a.integers[0]);
                } else {
                    json.begin_array();
                    for (const std::int64_t v : a.integers) json.value(v);
                    json.end_array();
                }
                break;
            case AttributeValue::Kind::real:
                if (scalar && a.reals.size() == 1) {
                    json.value(a.reals[0]);
                } else {
                    json.begin_array();
                    for (const double v : a.reals) json.value(v);
                    json.end_array();
                }
                break;
            case AttributeValue::Kind::text: json.value(a.text); break;
            case AttributeValue::Kind::other: json.value("<" + a.type + " " + shape_text(a.shape) + ">"); break;
        }
    }
    json.end_object();
}

void write_dims(JsonWriter& json, const io::Dims& dims) {
    json.begin_array();
    for (const auto extent : dims) json.value(extent);
    json.end_array();
}

void write_strings(JsonWriter& json, const std::vector<std::string>& items) {
    json.begin_array();
    for (const std::string& item : items) json.value(item);
    json.end_array();
}

void write_schema(JsonWriter& json, const FileSchema& schema) {
    json.begin_object().key("datasets").begin_array();
    for (const DatasetSchema& d : schema.datasets) {
        json.begin_object().key("path").value(d.path).key("dtype").value(d.type.name()).key("shape");
        write_dims(json, d.dims);
        json.key("chunks");
        if (d.chunk.empty()) {
            json.null();
        } else {
            write_dims(json, d.chunk);
        }
        json.key("filters");
        write_strings(json, d.filters);
        json.key("labels");
        write_strings(json, d.labels);
        json.key("dims");
        write_strings(json, d.scales);
        json.key("dimension_scale").value(d.is_dimension_scale);
        json.key("attributes");
        write_attributes(json, d.attributes);
        json.end_object();
    }
    json.end_array().key("groups");
    write_strings(json, schema.groups);
    json.key("attributes");
    write_attributes(json, schema.attributes);
    json.end_object();
}

void write_input(JsonWriter& json, const io::InputSpec& spec) {
    json.begin_object()
        .key("mode").value(spec.mode == io::InputMode::embeddings ? "embeddings" : "qkv")
        .key("n").value(spec.n)
        .key("len").value(spec.len)
        .key("d").value(spec.d)
        .key("heads").value(spec.heads)
        .key("d_k").value(spec.d_k)
        .key("d_v").value(spec.d_v)
        .key("d_out").value(spec.d_out())
        .key("dtype").value(io::name_of(spec.dtype));
    if (spec.mode == io::InputMode::embeddings) {
        json.key("dataset").value(spec.dataset);
    } else {
        json.key("query").value(spec.query).key("key").value(spec.key).key("value").value(spec.value);
        json.key("layout").value(spec.layout == io::QkvLayout::split ? "split" : "packed");
    }
    json.key("lengths");
    if (spec.lengths.empty()) {
        json.null();
    } else {
        json.value(spec.lengths);
    }
    json.key("weights");
    if (spec.weights) {
        json.value(spec.weights->path);
    } else {
        json.null();
    }
    json.key("sequence_layout").value(spec.packed ? "packed" : "padded");
    if (spec.packed) json.key("tokens").value(spec.tokens).key("offsets").value(spec.offsets);
    json.end_object();
}

void write_output(JsonWriter& json, const io::OutputCheck& check) {
    json.begin_object()
        .key("n").value(check.n)
        .key("first_sequence").value(check.first_sequence)
        .key("len").value(check.len)
        .key("d_out").value(check.d_out)
        .key("heads").value(check.heads)
        .key("complete");
    if (check.complete) {
        json.value(*check.complete == 1);
    } else {
        json.null();
    }
    json.key("written").value(check.written);
    json.key("sequence_layout").value(check.packed ? "packed" : "padded");
    if (check.packed) json.key("tokens").value(check.tokens);
    json.key("attention");
    if (check.has_attention) {
        json.begin_object()
            .key("dtype").value(check.attention_dtype)
            .key("first_sequence").value(check.attention_first)
            .key("sequences").value(check.attention_count)
            .key("heads").value(check.attention_heads)
            .end_object();
    } else {
        json.null();
    }
    json.key("problems");
    write_strings(json, check.problems);
    json.key("warnings");
    write_strings(json, check.warnings);
    json.end_object();
}

}  // namespace

void print_text(std::ostream& out, const InspectReport& report) {
    if (report.schema) print_schema(out, report);
    if (report.output) {
        for (const std::string& warning : report.output->warnings) out << "warning: " << warning << '\n';
        if (report.output->problems.size() > 1) {
            out << "problems:\n";
            for (const std::string& problem : report.output->problems) out << "  " << problem << '\n';
        }
    }
    if (report.weights && report.weights->problems.size() > 1) {
        out << "problems:\n";
        for (const std::string& problem : report.weights->problems) out << "  " << problem << '\n';
    }
    for (const std::string& note : report.notes) out << "note: " << note << '\n';
    // .npy shards have no HDF5 schema, only the input they make.
    if ((report.schema || report.input) && (report.code == exit_ok || report.verdict_is_state)) out << report.verdict << '\n';
}

void print_json(std::ostream& out, const InspectReport& report) {
    JsonWriter json;
    json.begin_object()
        .key("file").value(report.path)
        .key("kind").value(report.schema || report.input ? io::name_of(report.kind) : "unreadable")
        .key("valid").value(report.code == exit_ok)
        .key("exit_code").value(report.code)
        .key("message").value(report.verdict)
        .key("in_progress").value(report.in_progress)
        .key("notes");
    write_strings(json, report.notes);
    json.key("schema");
    if (report.schema) {
        write_schema(json, *report.schema);
    } else {
        json.null();
    }
    json.key("input");
    if (report.input) {
        write_input(json, *report.input);
    } else {
        json.null();
    }
    json.key("output");
    if (report.output) {
        write_output(json, *report.output);
    } else {
        json.null();
    }
    json.key("weights");
    if (report.weights) {
        json.begin_object()
            .key("d").value(report.weights->d)
            .key("qk_width").value(report.weights->qk_width)
            .key("v_width").value(report.weights->v_width)
            .key("d_out").value(report.weights->d_out)
            .key("datasets");
        write_strings(json, report.weights->present);
        json.key("problems");
        write_strings(json, report.weights->problems);
        json.end_object();
    } else {
        json.null();
    }
    json.end_object();
    out << json.text() << '\n';
}

}  // namespace attnbatch::cli
