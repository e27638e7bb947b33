// What an HDF5 file holds, read without assuming anything about its content: every dataset at
// any depth (type, shape, chunking, filters, dimension labels, attributes) and the root
// attributes. `inspect` prints it and validates against it.
#pragma once

#include "attnbatch/io/h5_dataset.hpp"
#include "attnbatch/io/h5_file.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace attnbatch::cli {

struct AttributeValue {
    enum class Kind { integer, real, text, other };
    std::string name;
    Kind kind = Kind::other;
    std::string type;   // "int64", "float64", "string", "other(1 bytes)"
    io::Dims shape;     // empty: scalar
    std::vector<std::int64_t> integers;  // Kind::integer, one per element
    std::vector<double> reals;           // Kind::real
    std::string text;                    // Kind::text (scalar strings only)
};

struct DatasetSchema {
    std::string path;
    io::TypeInfo type;
    io::Dims dims;                     // empty: scalar
    io::Dims chunk;                    // empty: contiguous or compact layout
    std::vector<std::string> filters;  // in pipeline order: "shuffle", "deflate", ...
    std::vector<std::string> labels;   // one per axis, "" when unlabelled
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

// io::H5Error when the file's structure cannot be read (a damaged file).
FileSchema read_schema(const io::File& file);

// "deflate", "shuffle", ..., or "filter 32015" for an id without a name here.
std::string filter_name(int id);

}  // namespace attnbatch::cli
