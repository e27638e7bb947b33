// Attributes, rewritten in place when the type and shape already match.
#include "attnbatch/io/h5/attribute.hpp"

#include "h5/check.hpp"
#include "h5/compat.hpp"
#include "h5/strings.hpp"
#include "h5/type_info_of.hpp"

#include <stdexcept>

namespace attnbatch::io {
namespace {

Where attribute_where(ObjectRef object, const std::string& name) {
    return Where{object.where->file, object.where->object + " attribute " + name};
}

DataspaceHandle attribute_space(const Dims& dims, const Where& where) {
    if (dims.empty()) return DataspaceHandle(H5_CALL(H5Screate, where, H5S_SCALAR));
    return DataspaceHandle(
        H5_CALL(H5Screate_simple, where, static_cast<int>(dims.size()), detail::extents_of(dims).data(), nullptr));
}

Dims space_dims(hid_t space, const Where& where) {
    const int rank = H5_CALL(H5Sget_simple_extent_ndims, where, space);
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    if (rank > 0) H5_CALL(H5Sget_simple_extent_dims, where, space, dims.data(), nullptr);
    return detail::dims_of(dims);
}

// An existing attribute of the same type and shape is overwritten in place; any other is
// replaced, so a writer never fails on a file written by an older version of itself.
void write_attribute(ObjectRef object, const std::string& name, hid_t file_type, hid_t mem_type, const Dims& dims,
                     const void* data) {
    const Where where = attribute_where(object, name);
    if (H5_CALL(H5Aexists, where, object.id, name.c_str()) > 0) {
        const AttributeHandle existing(H5_CALL(H5Aopen, where, object.id, name.c_str(), H5P_DEFAULT));
        const DatatypeHandle type(H5_CALL(H5Aget_type, where, existing.id()));
        const DataspaceHandle space(H5_CALL(H5Aget_space, where, existing.id()));
        const bool same_shape = H5_CALL(H5Sget_simple_extent_type, where, space.id()) ==
                                    (dims.empty() ? H5S_SCALAR : H5S_SIMPLE) &&
                                space_dims(space.id(), where) == dims;
        if (same_shape && H5_CALL(H5Tequal, where, type.id(), file_type) > 0) {
            H5_CALL(H5Awrite, where, existing.id(), mem_type, data);
            return;
        }
    }
    if (H5_CALL(H5Aexists, where, object.id, name.c_str()) > 0) H5_CALL(H5Adelete, where, object.id, name.c_str());
    const DataspaceHandle space = attribute_space(dims, where);
    const AttributeHandle attribute(
        H5_CALL(H5Acreate2, where, object.id, name.c_str(), file_type, space.id(), H5P_DEFAULT, H5P_DEFAULT));
    H5_CALL(H5Awrite, where, attribute.id(), mem_type, data);
}

struct OpenAttribute {
    ObjectRef object;
    std::string name;
    Where where;
    AttributeHandle attribute;
    DataspaceHandle space;
    DatatypeHandle type;
    H5T_class_t type_class;
    hssize_t points;
};

OpenAttribute open_attribute(ObjectRef object, const std::string& name) {
    OpenAttribute open{object, name, attribute_where(object, name), {}, {}, {}, H5T_NO_CLASS, 0};
    open.attribute = AttributeHandle(H5_CALL(H5Aopen, open.where, object.id, name.c_str(), H5P_DEFAULT));
    open.space = DataspaceHandle(H5_CALL(H5Aget_space, open.where, open.attribute.id()));
    open.type = DatatypeHandle(H5_CALL(H5Aget_type, open.where, open.attribute.id()));
    open.type_class = H5_CALL(H5Tget_class, open.where, open.type.id());
    open.points = H5_CALL(H5Sget_simple_extent_npoints, open.where, open.space.id());
    return open;
}

void expect(bool condition, const OpenAttribute& open, const char* what) {
    if (condition) return;
    const std::string type = detail::type_info_of(open.type.id(), open.where).name();
    const std::string found = open.points == 0 ? "an empty " + type : attribute_type_text(type, space_dims(open.space.id(), open.where));
    throw Error(exit_invalid_input,
                attribute_type_message(open.object.where->file, open.object.where->object, open.name, found, what));
}

}  // namespace

std::string attribute_label(const std::string& object, const std::string& name) {
    return object == "/" || object.empty() ? "root attribute " + name : "attribute " + name + " of " + object;
}

std::string attribute_type_text(const std::string& type, const Dims& shape) {
    const std::string article = type.find_first_of("aeiou") == 0 ? "an " : "a ";
    return shape.empty() ? article + type : article + type + " array of shape " + shape_text(shape);
}

std::string attribute_type_message(const std::string& file, const std::string& object, const std::string& name,
                                   const std::string& found, const std::string& expected) {
    return file + ": " + attribute_label(object, name) + " is " + found + ", expected " + expected;
}

bool has_attribute(ObjectRef object, const std::string& name) {
    return H5_CALL(H5Aexists, attribute_where(object, name), object.id, name.c_str()) > 0;
}

void set_int_attribute(ObjectRef object, const std::string& name, std::int64_t value) {
    write_attribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, {}, &value);
}

void set_real_attribute(ObjectRef object, const std::string& name, double value) {
    write_attribute(object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {}, &value);
}

void set_text_attribute(ObjectRef object, const std::string& name, const std::string& value) {
    const DatatypeHandle type = detail::utf8_string_type(attribute_where(object, name));
    const char* data = value.c_str();
    write_attribute(object, name, type.id(), type.id(), {}, &data);
}

void set_int_array_attribute(ObjectRef object, const std::string& name, const std::vector<std::int64_t>& values) {
    if (values.empty()) throw std::invalid_argument("attribute " + name + ": HDF5 has no empty simple dataspace here");
    write_attribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, Dims{values.size()}, values.data());
}

std::int64_t get_int_attribute(ObjectRef object, const std::string& name) {
    const OpenAttribute open = open_attribute(object, name);
    expect(open.type_class == H5T_INTEGER && open.points == 1, open, "a scalar integer");
    std::int64_t value = 0;
    H5_CALL(H5Aread, open.where, open.attribute.id(), H5T_NATIVE_INT64, &value);
    return value;
}

double get_real_attribute(ObjectRef object, const std::string& name) {
    const OpenAttribute open = open_attribute(object, name);
    expect((open.type_class == H5T_FLOAT || open.type_class == H5T_INTEGER) && open.points == 1, open,
           "a scalar number");
    double value = 0;
    H5_CALL(H5Aread, open.where, open.attribute.id(), H5T_NATIVE_DOUBLE, &value);
    return value;
}

std::string get_text_attribute(ObjectRef object, const std::string& name) {
    const OpenAttribute open = open_attribute(object, name);
    expect(open.type_class == H5T_STRING && open.points == 1, open, "a scalar string");
    const hid_t attribute = open.attribute.id();
    return detail::read_string(
        open.type.id(), open.space.id(),
        [attribute](hid_t mem_type, void* buffer) { return H5Aread(attribute, mem_type, buffer); }, "H5Aread",
        open.where);
}

std::vector<std::int64_t> get_int_array_attribute(ObjectRef object, const std::string& name) {
    const OpenAttribute open = open_attribute(object, name);
    expect(open.type_class == H5T_INTEGER, open, "an integer array");
    std::vector<std::int64_t> values(static_cast<std::size_t>(open.points));
    if (!values.empty()) H5_CALL(H5Aread, open.where, open.attribute.id(), H5T_NATIVE_INT64, values.data());
    return values;
}

}  // namespace attnbatch::io
