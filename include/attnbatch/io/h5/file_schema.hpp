// What an HDF5 file holds, read without assuming anything about its content: every dataset at
// any depth (type, shape, chunking, filters, dimension labels, attributes) and the root
// attributes. `inspect` prints it and validates against it (output/output_check.hpp,
// models/weights_spec.hpp, file_kind.hpp).
#pragma once

#include "attnbatch/io/h5/dims.hpp"
#include "attnbatch/io/h5/type_info.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace attnbatch::io {

struct AttributeValue {
    enum class Kind { integer, real, text, other };
    std::string name;
    Kind kind = Kind::other;
    std::string type;   // "int64", "float64", "string", "other(1 bytes)"
    Dims shape;         // empty: scalar
    std::vector<std::int64_t> integers;  // Kind::integer, one per element
    std::vector<double> reals;           // Kind::real
    std::string text;                    // Kind::text (scalar strings only)
};

struct DatasetSchema {
    std::string path;
    TypeInfo type;
    Dims dims;                         // empty: scalar
    Dims chunk;                        // empty: contiguous or compact layout
    std::vector<std::string> filters;  // in pipeline order: "shuffle", "deflate", ...
    std::vector<std::string> labels;   // one per axis, "" when unlabelled
    std::vector<std::string> scales;   // the dimension scale attached to each axis, "" where none
    bool is_dimension_scale = false;   // a scale itself (the netCDF name of an axis)
    std::vector<AttributeValue> attributes;

    const AttributeValue* attribute(const std::string& name) const;
};

struct FileSchema {
    std::vector<DatasetSchema> datasets;  // by path, every depth
    std::vector<std::string> groups;      // below the root
    std::vector<AttributeValue> attributes;

    const DatasetSchema* dataset(const std::string& path) const;  // null when absent
    const AttributeValue* attribute(const std::string& name) const;
};

// Opens any file read-only and reads its schema: Error exit 4 when it cannot be read at all,
// exit 3 when it is not HDF5, or is an OUTPUT.partial that the run writing it holds locked;
// H5Error (with HDF5's error stack) when the file's structure cannot be read (a damaged file).
FileSchema read_file_schema(const std::string& path);

// One root attribute as the schema holds it, for readers that judge an attribute's type
// themselves (the weights rules, applied alike to a file and to its schema).
class File;
AttributeValue read_root_attribute(const File& file, const std::string& name);

// "deflate", "shuffle", ..., or "filter 32015" for an id without a name here.
std::string filter_name(int id);

}  // namespace attnbatch::io
