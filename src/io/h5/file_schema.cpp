// Walking a file with the HDF5 C API: the rest of this layer opens what it knows the path of;
// a schema must discover paths and read attributes of any type.
#include "attnbatch/io/h5/file_schema.hpp"

#include "attnbatch/io/h5/attribute.hpp"
#include "attnbatch/io/h5/dataset.hpp"
#include "attnbatch/io/h5/file.hpp"
#include "attnbatch/io/h5/error.hpp"
#include "h5/check.hpp"
#include "h5/open_checked.hpp"
#include "h5/compat.hpp"
#include "h5/type_info_of.hpp"

#include <H5DSpublic.h>

#include <set>

namespace attnbatch::io {
namespace {

// The dimension-scales API keeps its bookkeeping in attributes; they say nothing a reader
// needs and their reference types read as noise.
bool is_dimension_scale_bookkeeping(const std::string& name) {
    static const std::set<std::string> names = {"DIMENSION_LABELS", "DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME"};
    return names.count(name) != 0;
}

bool ends_with(const std::string& text, const std::string& suffix) {
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

AttributeValue read_attribute(ObjectRef object, const std::string& name) {
    const Where where{object.where->file, object.where->object + " attribute " + name};
    AttributeValue value;
    value.name = name;
    const AttributeHandle attribute(H5_CALL(H5Aopen, where, object.id, name.c_str(), H5P_DEFAULT));
    const DatatypeHandle type(H5_CALL(H5Aget_type, where, attribute.id()));
    const DataspaceHandle space(H5_CALL(H5Aget_space, where, attribute.id()));
    const TypeInfo info = detail::type_info_of(type.id(), where);
    value.type = info.name();
    const int rank = H5_CALL(H5Sget_simple_extent_ndims, where, space.id());
    std::vector<hsize_t> shape(static_cast<std::size_t>(rank));
    if (rank > 0) H5_CALL(H5Sget_simple_extent_dims, where, space.id(), shape.data(), nullptr);
    value.shape = detail::dims_of(shape);
    const auto points = static_cast<std::size_t>(H5_CALL(H5Sget_simple_extent_npoints, where, space.id()));
    if (points == 0) return value;  // a null dataspace: nothing to show
    if (info.type_class == TypeClass::integer) {
        value.integers.resize(points);
        H5_CALL(H5Aread, where, attribute.id(), H5T_NATIVE_INT64, value.integers.data());
        value.kind = AttributeValue::Kind::integer;
    } else if (info.type_class == TypeClass::floating) {
        value.reals.resize(points);
        H5_CALL(H5Aread, where, attribute.id(), H5T_NATIVE_DOUBLE, value.reals.data());
        value.kind = AttributeValue::Kind::real;
    } else if (info.type_class == TypeClass::string && points == 1) {
        value.text = get_text_attribute(object, name);
        value.kind = AttributeValue::Kind::text;
    }
    return value;
}

std::vector<AttributeValue> read_attributes(ObjectRef object) {
    std::vector<std::string> names;
    hsize_t position = 0;
    const auto collect = [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->emplace_back(name);
        return 0;
    };
    H5_CALL(H5Aiterate2, *object.where, object.id, H5_INDEX_NAME, H5_ITER_INC, &position, collect, &names);
    std::vector<AttributeValue> attributes;
    for (const std::string& name : names) {
        if (!is_dimension_scale_bookkeeping(name)) attributes.push_back(read_attribute(object, name));
    }
    return attributes;
}

// Hard links only: a soft link would list a dataset twice, an external one another file.
std::vector<std::string> linked_paths(const File& file) {
    std::vector<std::string> paths;
    // The info struct is H5L_info_t in 1.10 and H5L_info2_t from 1.12 on; both have `type`,
    // and a generic lambda converts to either callback type.
    const auto collect = [](hid_t, const char* name, const auto* info, void* data) -> herr_t {
        if (info->type == H5L_TYPE_HARD) static_cast<std::vector<std::string>*>(data)->push_back(std::string("/") + name);
        return 0;
    };
    H5_CALL(H5Lvisit, file.where(), file.id(), H5_INDEX_NAME, H5_ITER_INC, collect, &paths);
    return paths;
}

DatasetSchema describe_dataset(const File& file, const std::string& path) {
    const Dataset dataset = Dataset::open(file, path);
    DatasetSchema schema;
    schema.path = path;
    schema.type = dataset.type_info();
    schema.dims = dataset.dims();
    schema.chunk = dataset.chunk();
    for (const int id : dataset.filters()) schema.filters.push_back(filter_name(id));
    schema.labels = dimension_labels(dataset);
    schema.scales = dimension_scale_names(dataset);
    schema.is_dimension_scale = H5_CALL(H5DSis_scale, dataset.where(), dataset.id()) > 0;
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

namespace {

// The file-open checks of read_file_schema(): the input's, but that any file may be asked about
// (a damaged one is exit 4, it cannot be read), and a .partial locked by its run is in progress.
File open_for_schema(const std::string& path) {
    detail::check_readable_hdf5(path, "");
    try {
        return File::open(path, FileMode::read_only);
    } catch (const H5Error& error) {
        if (error.is_lock_failure() && ends_with(path, ".partial")) {
            throw Error(exit_invalid_input, "output in progress: " + path +
                                                    " is locked by the process writing it (a running attnbatch run); "
                                                    "hint: inspect the final OUTPUT once the run ends");
        }
        throw Error(exit_io, path + ": cannot open: " + error.what());
    }
}

}  // namespace

FileSchema read_file_schema(const std::string& path) {
    const File file = open_for_schema(path);
    FileSchema schema;
    for (const std::string& object : linked_paths(file)) {
        switch (object_kind(file, object)) {
            case ObjectKind::dataset: schema.datasets.push_back(describe_dataset(file, object)); break;
            case ObjectKind::group: schema.groups.push_back(object); break;
            default: break;
        }
    }
    schema.attributes = read_attributes(file);
    return schema;
}

AttributeValue read_root_attribute(const File& file, const std::string& name) { return read_attribute(file, name); }

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

}  // namespace attnbatch::io
