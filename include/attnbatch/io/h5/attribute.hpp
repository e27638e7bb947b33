// Attributes on the root group, a group or a dataset: scalar int64, double and UTF-8 string,
// and 1-D int64 arrays. Writing over an existing attribute is safe: same type and shape are
// rewritten in place (so a flag like `complete` flips without reallocating), anything else is
// deleted and recreated.
#pragma once

#include "attnbatch/io/h5/dataset.hpp"
#include "attnbatch/io/h5/file.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace attnbatch::io {

// Anything attributes attach to; built implicitly from a File, Group or Dataset.
struct ObjectRef {
    ObjectRef(const File& file) : id(file.id()), where(&file.where()) {}           // NOLINT: implicit by design
    ObjectRef(const Group& group) : id(group.id()), where(&group.where()) {}       // NOLINT
    ObjectRef(const Dataset& dataset) : id(dataset.id()), where(&dataset.where()) {}  // NOLINT
    hid_t id;
    const Where* where;
};

bool has_attribute(ObjectRef object, const std::string& name);

// Distinct names rather than overloads: a literal 1 must not silently become a double.
void set_int_attribute(ObjectRef object, const std::string& name, std::int64_t value);
void set_real_attribute(ObjectRef object, const std::string& name, double value);
void set_text_attribute(ObjectRef object, const std::string& name, const std::string& value);
void set_int_array_attribute(ObjectRef object, const std::string& name, const std::vector<std::int64_t>& values);

// The readers below throw Error exit 3 (invalid input) when the attribute has another type or
// shape, naming file, object, attribute, what was found and what was expected: a file's
// attributes are user data, so a wrong one is the file's fault, never an internal error.
// A missing attribute or a failed read stays an H5Error.
std::int64_t get_int_attribute(ObjectRef object, const std::string& name);
double get_real_attribute(ObjectRef object, const std::string& name);
std::string get_text_attribute(ObjectRef object, const std::string& name);  // variable or fixed length
std::vector<std::int64_t> get_int_array_attribute(ObjectRef object, const std::string& name);

// The wording those errors use, shared with the checks that judge a file from its schema
// (inspect), so that inspect and the commands reading the attribute refuse it alike.
// "root attribute heads" or "attribute first_sequence of /attention":
std::string attribute_label(const std::string& object, const std::string& name);
// "a string", "an int64 array of shape [2]"; `type` as TypeInfo::name() spells it:
std::string attribute_type_text(const std::string& type, const Dims& shape);
// "FILE: root attribute heads is a string, expected a scalar integer":
std::string attribute_type_message(const std::string& file, const std::string& object, const std::string& name,
                                   const std::string& found, const std::string& expected);

}  // namespace attnbatch::io
