// Datasets: round trips for every memory type, conversions, hyperslabs of rows and boxes,
// empty selections, guarded buffers, gzip + shuffle, labels, text and half precision.
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"

#include "attnbatch/kernels/half.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

namespace attnbatch::io {
namespace {

using testing::TempDir;

template <class T>
struct TypeCase;
template <>
struct TypeCase<float> {
    static Datatype file_type() { return Datatype::float32(); }
};
template <>
struct TypeCase<double> {
    static Datatype file_type() { return Datatype::float64(); }
};
template <>
struct TypeCase<std::int32_t> {
    static Datatype file_type() { return Datatype::int32(); }
};
template <>
struct TypeCase<std::int64_t> {
    static Datatype file_type() { return Datatype::int64(); }
};
template <>
struct TypeCase<std::uint16_t> {
    static Datatype file_type() { return Datatype::float16(); }
};

template <class T>
class H5RoundTrip : public ::testing::Test {};
using MemoryTypes = ::testing::Types<float, double, std::int32_t, std::int64_t, std::uint16_t>;
TYPED_TEST_SUITE(H5RoundTrip, MemoryTypes);

TYPED_TEST(H5RoundTrip, WholeDatasetAndRows) {
    const TempDir dir;
    const std::string path = dir.file("a.h5");
    std::vector<TypeParam> values(4 * 3 * 2);
    for (std::size_t i = 0; i < values.size(); ++i) {
        if constexpr (std::is_same_v<TypeParam, std::uint16_t>) {
            values[i] = kernels::float_to_half(0.5f * static_cast<float>(i) - 3.0f);
        } else {
            values[i] = static_cast<TypeParam>(i * 3) - static_cast<TypeParam>(7);
        }
    }
    {
        const File file = File::create(path);
        const Dataset dataset = Dataset::create(file, "/g/x", TypeCase<TypeParam>::file_type(), {4, 3, 2});
        write_rows(dataset, 0, 2, values.data(), 12);
        write_rows(dataset, 2, 2, values.data() + 12, 12);
    }
    const File file = File::open(path, FileMode::read_only);
    const Dataset dataset = Dataset::open(file, "/g/x");
    EXPECT_EQ(dataset.dims(), (Dims{4, 3, 2}));
    EXPECT_EQ(read_all<TypeParam>(dataset), values);
    std::vector<TypeParam> rows(6);
    read_rows(dataset, 3, 1, rows.data(), rows.size());
    EXPECT_EQ(rows, std::vector<TypeParam>(values.begin() + 18, values.end()));
}

TEST(H5Dataset, TypeInfoNamesTheStoredType) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    EXPECT_EQ(Dataset::create(file, "/a", Datatype::float64(), {1}).type_info().name(), "float64");
    EXPECT_EQ(Dataset::create(file, "/b", Datatype::float16(), {1}).type_info().name(), "float16");
    EXPECT_EQ(Dataset::create(file, "/c", Datatype::int32(), {1}).type_info().name(), "int32");
    const Dataset u8 = Dataset::create(file, "/d", Datatype::copy_of(H5T_STD_U8LE), {1});
    EXPECT_EQ(u8.type_info().type_class, TypeClass::integer);
    EXPECT_FALSE(u8.type_info().is_signed);
    EXPECT_EQ(u8.type_info().name(), "uint8");
}

TEST(H5Dataset, HdfConvertsDoubleToFloatAndHalfToFloatOnRead) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    const std::vector<double> doubles{1.0 / 3.0, -2.5, 1e-3};
    testing::put(file, "/d", Datatype::float64(), {3}, doubles);
    const std::vector<float> as_float = read_all<float>(Dataset::open(file, "/d"));
    for (std::size_t i = 0; i < doubles.size(); ++i) EXPECT_EQ(as_float[i], static_cast<float>(doubles[i]));

    const std::vector<std::uint16_t> halves{kernels::float_to_half(0.333f), kernels::float_to_half(-65504.0f),
                                            kernels::float_to_half(6.1e-5f)};
    testing::put(file, "/h", Datatype::float16(), {3}, halves);
    const std::vector<float> widened = read_all<float>(Dataset::open(file, "/h"));
    for (std::size_t i = 0; i < halves.size(); ++i) EXPECT_EQ(widened[i], kernels::half_to_float(halves[i]));
}

TEST(H5Dataset, GeneralSlabReadsABox) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    const std::vector<float> values = testing::ramp(5 * 4 * 3);
    testing::put(file, "/x", Datatype::float32(), {5, 4, 3}, values);
    const Dataset dataset = Dataset::open(file, "/x");
    std::vector<float> box(2 * 2 * 2);
    read_slab(dataset, Slab{{1, 2, 1}, {2, 2, 2}}, box.data(), box.size());
    std::size_t at = 0;
    for (std::size_t a = 1; a < 3; ++a)
        for (std::size_t b = 2; b < 4; ++b)
            for (std::size_t c = 1; c < 3; ++c) EXPECT_EQ(box[at++], values[(a * 4 + b) * 3 + c]);
}

TEST(H5Dataset, EmptySelectionStillMakesTheCall) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    const Dataset dataset = Dataset::create(file, "/x", Datatype::float32(), {3, 2});
    EXPECT_NO_THROW(write_rows<float>(dataset, 3, 0, nullptr, 0));
    EXPECT_NO_THROW(read_rows<float>(dataset, 1, 0, nullptr, 0));
}

TEST(H5Dataset, GuardsExtentAndBuffer) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    const Dataset dataset = Dataset::create(file, "/x", Datatype::float32(), {3, 2});
    std::vector<float> buffer(4);
    EXPECT_THROW(read_rows(dataset, 2, 2, buffer.data(), buffer.size()), std::invalid_argument);  // past N
    EXPECT_THROW(read_rows(dataset, 0, 3, buffer.data(), buffer.size()), std::invalid_argument);  // 6 > 4
    EXPECT_THROW(read_slab(dataset, Slab{{0}, {1}}, buffer.data(), buffer.size()), std::invalid_argument);
}

TEST(H5Dataset, OpeningAMissingDatasetNamesH5Dopen2AndThePath) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    try {
        Dataset::open(file, "/nothing");
        FAIL() << "no exception";
    } catch (const H5Error& error) {
        EXPECT_EQ(error.call(), "H5Dopen2");
        EXPECT_EQ(error.object(), "/nothing");
        EXPECT_NE(std::string(error.what()).find(dir.file("a.h5") + ":/nothing"), std::string::npos) << error.what();
    }
}

TEST(H5Dataset, GzipWithShuffleIsChunkedAndReadable) {
    const TempDir dir;
    const std::string path = dir.file("a.h5");
    const std::vector<float> values = testing::ramp(64 * 32);
    {
        const File file = File::create(path);
        DatasetCreation creation;
        creation.chunk = {8, 32};
        creation.gzip_level = 4;
        const Dataset dataset = Dataset::create(file, "/x", Datatype::float32(), {64, 32}, creation);
        write_slab(dataset, Slab{}, values.data(), values.size());
    }
    const File file = File::open(path, FileMode::read_only);
    const Dataset dataset = Dataset::open(file, "/x");
    EXPECT_EQ(dataset.chunk(), (Dims{8, 32}));
    EXPECT_EQ(dataset.filters(), (std::vector<int>{H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE}));
    EXPECT_EQ(read_all<float>(dataset), values);
    EXPECT_THROW(Dataset::create(file, "/y", Datatype::float32(), {4}, DatasetCreation{{}, 3, false, 0.0}),
                 std::invalid_argument);
}

TEST(H5Dataset, FillValueShowsWhereNothingWasWritten) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    DatasetCreation creation;
    creation.chunk = {2};
    creation.has_fill = true;
    creation.fill_value = std::numeric_limits<double>::quiet_NaN();
    const Dataset lse = Dataset::create(file, "/lse", Datatype::float32(), {4}, creation);
    const float one = 1.0f;
    write_rows(lse, 1, 1, &one, 1);
    const std::vector<float> values = read_all<float>(lse);
    EXPECT_TRUE(std::isnan(values[0]));
    EXPECT_EQ(values[1], 1.0f);
    EXPECT_TRUE(std::isnan(values[3]));
}

TEST(H5Dataset, DimensionLabelsRoundTrip) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    const Dataset dataset = Dataset::create(file, "/x", Datatype::float32(), {2, 3, 4});
    EXPECT_EQ(dimension_labels(dataset), (std::vector<std::string>{"", "", ""}));
    set_dimension_labels(dataset, {"N", "L", "D"});
    EXPECT_EQ(dimension_labels(dataset), (std::vector<std::string>{"N", "L", "D"}));
    EXPECT_THROW(set_dimension_labels(dataset, {"N"}), std::invalid_argument);
}

TEST(H5Dataset, TextDatasetHoldsMoreThanAnAttributeCan) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    std::string text;
    while (text.size() < 200 * 1024) text += "[run]\nheads = 8  # ünïcode too\n";
    write_text_dataset(file, "/config", text);
    EXPECT_EQ(read_text_dataset(file, "/config"), text);
    write_text_dataset(file, "/empty", "");
    EXPECT_EQ(read_text_dataset(file, "/empty"), "");
}

TEST(H5Dataset, ReadsFixedLengthStringsToo) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, 16);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t dataset = H5Dcreate2(file.id(), "/fixed", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    char data[16] = "heads = 4";
    H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    H5Dclose(dataset);
    H5Sclose(space);
    H5Tclose(type);
    EXPECT_EQ(read_text_dataset(file, "/fixed"), "heads = 4");
}

TEST(H5Dataset, CloseIsChecked) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    Dataset dataset = Dataset::create(file, "/x", Datatype::float32(), {1});
    dataset.close();
    EXPECT_NO_THROW(dataset.close());  // already closed: nothing to do
    EXPECT_LT(dataset.id(), 0);
}

}  // namespace
}  // namespace attnbatch::io
