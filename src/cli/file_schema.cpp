// Walking a file with the HDF5 C API: the io layer opens what it knows the path of; a schema
// must discover paths and read attributes of any type, which only the C API does.
#include "file_schema.hpp"

#include "attnbatch/io/h5_attribute.hpp"
#include "attnbatch/io/h5_error.hpp"

#include <hdf5.h>

#include <set>

namespace attnbatch::cli {
namespace {

// The C calls here fail only on a damaged file; HDF5's stack stays with the io layer's own
// calls, these name the call and the object.
template <class R>
R checked(R result, const char* call, const io::Where& where) {
    if (static_cast<long long>(result) < 0) throw io::H5Error(call, where, {});
    return result;
}

// The dimension-scales API keeps its bookkeeping in attributes; they say nothing a reader
// needs and their reference types read as noise.
bool is_dimension_scale_bookkeeping(const std::string& name) {
    static const std::set<std::string> names = {"DIMENSION_LABELS", "DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME"};
    return names.count(name) != 0;
}

io::TypeInfo type_info_of(hid_t type, const io::Where& where) {
    io::TypeInfo info;
    info.size = H5Tget_size(type);
    switch (checked(H5Tget_class(type), "H5Tget_class", where)) {
        case H5T_INTEGER:
            info.type_class = io::TypeClass::integer;
            info.is_signed = H5Tget_sign(type) == H5T_SGN_2;
            break;
        case H5T_FLOAT: info.type_class = io::TypeClass::floating; break;
        case H5T_STRING: info.type_class = io::TypeClass::string; break;
        default: info.type_class = io::TypeClass::other; break;
    }
    return info;
}

AttributeValue read_attribute(io::ObjectRef object, const std::string& name) {
    const io::Where where{object.where->file, object.where->object + " attribute " + name};
    AttributeValue value;
    value.name = name;
    const io::AttributeHandle attribute(checked(H5Aopen(object.id, name.c_str(), H5P_DEFAULT), "H5Aopen", where));
    const io::DatatypeHandle type(checked(H5Aget_type(attribute.id()), "H5Aget_type", where));
    const io::DataspaceHandle space(checked(H5Aget_space(attribute.id()), "H5Aget_space", where));
    const io::TypeInfo info = type_info_of(type.id(), where);
    value.type = info.name();
    const int rank = checked(H5Sget_simple_extent_ndims(space.id()), "H5Sget_simple_extent_ndims", where);
    value.shape.resize(static_cast<std::size_t>(rank));
    if (rank > 0) checked(H5Sget_simple_extent_dims(space.id(), value.shape.data(), nullptr), "H5Sget_simple_extent_dims", where);
    const auto points = static_cast<std::size_t>(
        checked(H5Sget_simple_extent_npoints(space.id()), "H5Sget_simple_extent_npoints", where));
    if (points == 0) return value;  // a null dataspace: nothing to show
    if (info.type_class == io::TypeClass::integer) {
        value.integers.resize(points);
        checked(H5Aread(attribute.id(), H5T_NATIVE_INT64, value.integers.data()), "H5Aread", where);
        value.kind = AttributeValue::Kind::integer;
    } else if (info.type_class == io::TypeClass::floating) {
        value.reals.resize(points);
        checked(H5Aread(attribute.id(), H5T_NATIVE_DOUBLE, value.reals.data()), "H5Aread", where);
        value.kind = AttributeValue::Kind::real;
    } else if (info.type_class == io::TypeClass::string && points == 1) {
        value.text = io::get_text_attribute(object, name);
        value.kind = AttributeValue::Kind::text;
    }
    return value;
}

std::vector<AttributeValue> read_attributes(io::ObjectRef object) {
    std::vector<std::string> names;
    hsize_t position = 0;
    const auto collect = [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->emplace_back(name);
        return 0;
    };
    checked(H5Aiterate2(object.id, H5_INDEX_NAME, H5_ITER_INC, &position, collect, &names), "H5Aiterate2", *object.where);
    std::vector<AttributeValue> attributes;
    for (const std::string& name : names) {
        if (!is_dimension_scale_bookkeeping(name)) attributes.push_back(read_attribute(object, name));
    }
    return attributes;
}

// Hard links only: a soft link would list a dataset twice, an external one another file.
std::vector<std::string> linked_paths(const io::File& file) {
    std::vector<std::string> paths;
    // The info struct is H5L_info_t in 1.10 and H5L_info2_t from 1.12 on; both have `type`,
    // and a generic lambda converts to either callback type.
    const auto collect = [](hid_t, const char* name, const auto* info, void* data) -> herr_t {
        if (info->type == H5L_TYPE_HARD) static_cast<std::vector<std::string>*>(data)->push_back(std::string("/") + name);
        return 0;
    };
    checked(H5Lvisit(file.id(), H5_INDEX_NAME, H5_ITER_INC, collect, &paths), "H5Lvisit", file.where());
    return paths;
}

DatasetSchema describe_dataset(const io::File& file, const std::string& path) {
    const io::Dataset dataset = io::Dataset::open(file, path);
    DatasetSchema schema;
    schema.path = path;
    schema.type = dataset.type_info();
    schema.dims = dataset.dims();
    schema.chunk = dataset.chunk();
    for (const int id : dataset.filters()) schema.filters.push_back(filter_name(id));
    schema.labels = io::dimension_labels(dataset);
    schema.attributes = read_attributes(dataset);
    return schema;
}

const AttributeValue* find_attribute(const std::vector<AttributeValue>& attributes, const std::string& name) {
    for (const AttributeValue& attribute : attributes) {
        if (attribute.name == name) return &attribute;
    }
    return nullptr;
}

}  // namespace

const AttributeValue* DatasetSchema::attribute(const std::string& name) const { return find_attribute(attributes, name); }

const DatasetSchema* FileSchema::dataset(const std::string& path) const {
    for (const DatasetSchema& dataset : datasets) {
        if (dataset.path == path) return &dataset;
    }
    return nullptr;
}

const AttributeValue* FileSchema::attribute(const std::string& name) const { return find_attribute(attributes, name); }

FileSchema read_schema(const io::File& file) {
    FileSchema schema;
    for (const std::string& path : linked_paths(file)) {
        switch (io::object_kind(file, path)) {
            case io::ObjectKind::dataset: schema.datasets.push_back(describe_dataset(file, path)); break;
            case io::ObjectKind::group: schema.groups.push_back(path); break;
            default: break;
        }
    }
    schema.attributes = read_attributes(file);
    return schema;
}

std::string filter_name(int id) {
    switch (id) {
        case H5Z_FILTER_DEFLATE: return "deflate";
        case H5Z_FILTER_SHUFFLE: return "shuffle";
        case H5Z_FILTER_FLETCHER32: return "fletcher32";
        case H5Z_FILTER_SZIP: return "szip";
        case H5Z_FILTER_NBIT: return "nbit";
        case H5Z_FILTER_SCALEOFFSET: return "scaleoffset";
        case 32000: return "lzf";
        case 32001: return "blosc";
        case 32004: return "lz4";
        case 32008: return "bitshuffle";
        case 32015: return "zstd";
        default: return "filter " + std::to_string(id);
    }
}

}  // namespace attnbatch::cli
