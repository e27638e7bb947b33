#include "support/h5_files.hpp"

namespace attnbatch::testing {

io::Datatype other_half_width_float() {
    io::Datatype type = io::Datatype::copy_of(H5T_IEEE_F32LE);
    EXPECT_GE(H5Tset_fields(type.id(), 15, 9, 6, 0, 9), 0);
    EXPECT_GE(H5Tset_size(type.id(), 2), 0);
    EXPECT_GE(H5Tset_ebias(type.id(), 31), 0);
    return type;
}

std::vector<float> ramp(std::size_t count) {
    std::vector<float> values(count);
    for (std::size_t i = 0; i < count; ++i) values[i] = 0.25f * static_cast<float>(i % 17) - 2.0f;
    return values;
}

std::vector<double> ramp64(std::size_t count) {
    std::vector<double> values(count);
    for (std::size_t i = 0; i < count; ++i) values[i] = 0.25 * static_cast<double>(i % 17) - 2.0;
    return values;
}

io::Dims dataset_dims(const std::string& path, const std::string& dataset) {
    const io::File file = io::File::open(path, io::FileMode::read_only);
    return io::Dataset::open(file, dataset).dims();
}

io::TypeInfo dataset_type(const std::string& path, const std::string& dataset) {
    const io::File file = io::File::open(path, io::FileMode::read_only);
    return io::Dataset::open(file, dataset).type_info();
}

bool has_object(const std::string& path, const std::string& object) {
    const io::File file = io::File::open(path, io::FileMode::read_only);
    return io::object_kind(file, object) != io::ObjectKind::missing;
}

}  // namespace attnbatch::testing
