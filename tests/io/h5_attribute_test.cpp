// Attributes: every kind round-trips, overwriting is safe, failures name H5Aopen.
#include "attnbatch/io/h5/h5.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

namespace attnbatch::io {
namespace {

using testing::TempDir;

TEST(H5Attribute, EveryKindRoundTripsOnRootAndDataset) {
    const TempDir dir;
    const std::string path = dir.file("a.h5");
    {
        const File file = File::create(path);
        const Dataset dataset = Dataset::create(file, "/x", Datatype::float32(), {2});
        set_int_attribute(file, "count", -42);
        set_real_attribute(file, "scale", 0.125);
        set_text_attribute(file, "name", "attnbatch ✓");
        set_int_array_attribute(file, "range", {3, 9});
        set_int_attribute(dataset, "first_sequence", 7);
    }
    const File file = File::open(path, FileMode::read_only);
    EXPECT_TRUE(has_attribute(file, "count"));
    EXPECT_FALSE(has_attribute(file, "nothing"));
    EXPECT_EQ(get_int_attribute(file, "count"), -42);
    EXPECT_EQ(get_real_attribute(file, "scale"), 0.125);
    EXPECT_EQ(get_real_attribute(file, "count"), -42.0);  // integers widen
    EXPECT_EQ(get_text_attribute(file, "name"), "attnbatch ✓");
    EXPECT_EQ(get_int_array_attribute(file, "range"), (std::vector<std::int64_t>{3, 9}));
    EXPECT_EQ(get_int_attribute(Dataset::open(file, "/x"), "first_sequence"), 7);
}

TEST(H5Attribute, OverwritingIsSafeForSameAndDifferentTypes) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    set_int_attribute(file, "complete", 0);
    set_int_attribute(file, "complete", 1);  // in place
    EXPECT_EQ(get_int_attribute(file, "complete"), 1);
    set_text_attribute(file, "complete", "yes");  // replaced
    EXPECT_EQ(get_text_attribute(file, "complete"), "yes");
    set_text_attribute(file, "complete", "a much longer string than before");
    EXPECT_EQ(get_text_attribute(file, "complete"), "a much longer string than before");
    set_int_array_attribute(file, "range", {1, 2});
    set_int_array_attribute(file, "range", {1, 2, 3});  // another shape: replaced
    EXPECT_EQ(get_int_array_attribute(file, "range"), (std::vector<std::int64_t>{1, 2, 3}));
}

TEST(H5Attribute, MissingAttributeNamesTheCallAndObject) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    try {
        get_int_attribute(file, "complete");
        FAIL() << "no exception";
    } catch (const H5Error& error) {
        EXPECT_EQ(error.call(), "H5Aopen");
        EXPECT_NE(std::string(error.what()).find("attribute complete"), std::string::npos) << error.what();
    }
}

TEST(H5Attribute, ReadsAsciiStringsOtherToolsWrite) {
    const testing::TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    for (const bool variable : {true, false}) {
        const hid_t type = H5Tcopy(H5T_C_S1);  // ASCII: no conversion to UTF-8 exists
        H5Tset_size(type, variable ? H5T_VARIABLE : 8);
        const hid_t space = H5Screate(H5S_SCALAR);
        const char* name = variable ? "variable" : "fixed";
        const hid_t attribute = H5Acreate2(file.id(), name, type, space, H5P_DEFAULT, H5P_DEFAULT);
        const char* text = "ascii";
        char fixed[8] = "ascii";
        H5Awrite(attribute, type, variable ? static_cast<const void*>(&text) : fixed);
        H5Aclose(attribute);
        H5Sclose(space);
        H5Tclose(type);
        EXPECT_EQ(get_text_attribute(file, name), "ascii");
    }
}

TEST(H5Attribute, WrongKindIsInvalidInputNamingWhatWasFoundAndExpected) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    const auto refusal = [](const auto& read) -> std::pair<int, std::string> {
        try {
            read();
        } catch (const H5Error& error) {
            return {-1, error.what()};  // an H5Error is exit 4: a file that cannot be read
        } catch (const Error& error) {
            return {error.exit_code(), error.what()};
        }
        return {0, "no exception"};
    };
    const std::string path = dir.file("a.h5");
    set_text_attribute(file, "name", "x");
    EXPECT_EQ(refusal([&] { get_int_attribute(file, "name"); }),
              std::make_pair(3, path + ": root attribute name is a string, expected a scalar integer"));
    EXPECT_EQ(refusal([&] { get_real_attribute(file, "name"); }),
              std::make_pair(3, path + ": root attribute name is a string, expected a scalar number"));
    set_int_attribute(file, "n", 1);
    EXPECT_EQ(refusal([&] { get_text_attribute(file, "n"); }),
              std::make_pair(3, path + ": root attribute n is an int64, expected a scalar string"));
    set_real_attribute(file, "x", 0.5);
    EXPECT_EQ(refusal([&] { get_int_attribute(file, "x"); }),
              std::make_pair(3, path + ": root attribute x is a float64, expected a scalar integer"));
    set_int_array_attribute(file, "range", {3, 9});
    EXPECT_EQ(refusal([&] { get_int_attribute(file, "range"); }),
              std::make_pair(3, path + ": root attribute range is an int64 array of shape [2], expected a scalar integer"));
    set_text_attribute(file, "r", "x");
    EXPECT_EQ(refusal([&] { get_int_array_attribute(file, "r"); }),
              std::make_pair(3, path + ": root attribute r is a string, expected an integer array"));
    const Dataset dataset = Dataset::create(file, "/x", Datatype::float32(), {2});
    set_text_attribute(dataset, "first_sequence", "0");
    EXPECT_EQ(refusal([&] { get_int_attribute(Dataset::open(file, "/x"), "first_sequence"); }),
              std::make_pair(3, path + ": attribute first_sequence of /x is a string, expected a scalar integer"));
}

TEST(H5Attribute, TextDatasetOfAnotherTypeIsInvalidInput) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    Dataset::create(file, "/config", Datatype::float32(), {2});
    try {
        read_text_dataset(file, "/config");
        FAIL() << "no exception";
    } catch (const H5Error& error) {
        FAIL() << error.what();
    } catch (const Error& error) {
        EXPECT_EQ(error.exit_code(), 3);
        EXPECT_EQ(std::string(error.what()),
                  dir.file("a.h5") + ": /config is a float32 array of shape [2], expected a scalar string");
    }
}

}  // namespace
}  // namespace attnbatch::io
