// The superblock's end-of-file address, read without HDF5, on files HDF5 wrote in each
// superblock format, behind a user block, and cut short as a file-size limit leaves them.
#include "support/temp_dir.hpp"

#include "attnbatch/error.hpp"
#include "attnbatch/io/h5/superblock.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <vector>

namespace attnbatch::io {
namespace {

using testing::TempDir;

std::uint64_t size_of(const std::string& path) {
    struct stat status {};
    EXPECT_EQ(::stat(path.c_str(), &status), 0) << path;
    return static_cast<std::uint64_t>(status.st_size);
}

// A file of one dataset of 4096 floats, its creation and access lists set up by the callers.
void write_file(const std::string& path, const std::function<void(hid_t fcpl, hid_t fapl)>& setup = {}) {
    const hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (setup) setup(fcpl, fapl);
    const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, fapl);
    ASSERT_GE(file, 0) << path;
    const hsize_t dims[1] = {4096};
    const hid_t space = H5Screate_simple(1, dims, nullptr);
    const hid_t dataset = H5Dcreate2(file, "/x", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const std::vector<float> values(4096, 1.5f);
    H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    H5Dclose(dataset);
    H5Sclose(space);
    H5Fclose(file);
    H5Pclose(fcpl);
    H5Pclose(fapl);
}

unsigned superblock_version(const std::string& path) {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    H5F_info2_t info{};
    H5Fget_info2(file, &info);
    H5Fclose(file);
    return info.super.version;
}

bool hdf5_opens(const std::string& path) {
    hid_t file = -1;
    H5E_BEGIN_TRY { file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); }
    H5E_END_TRY;
    if (file < 0) return false;
    H5Fclose(file);
    return true;
}

// A whole file ends where its superblock says, whatever the format HDF5 chose.
void expect_recorded_end_is_size(const std::string& path, unsigned version) {
    EXPECT_EQ(superblock_version(path), version) << path;
    const std::optional<std::uint64_t> end = recorded_end_of_file(path);
    ASSERT_TRUE(end.has_value()) << path;
    EXPECT_EQ(*end, size_of(path)) << path;
}

TEST(Superblock, EachFormatRecordsTheEndOfAWholeFile) {
    const TempDir dir;
    write_file(dir.file("v0.h5"));
    expect_recorded_end_is_size(dir.file("v0.h5"), 0);
    // A non-default indexed-storage K needs format 1.
    write_file(dir.file("v1.h5"), [](hid_t fcpl, hid_t) { H5Pset_istore_k(fcpl, 64); });
    expect_recorded_end_is_size(dir.file("v1.h5"), 1);
    write_file(dir.file("v2.h5"), [](hid_t, hid_t fapl) { H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18); });
    expect_recorded_end_is_size(dir.file("v2.h5"), 2);
    write_file(dir.file("v3.h5"), [](hid_t, hid_t fapl) { H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST); });
    expect_recorded_end_is_size(dir.file("v3.h5"), 3);
}

TEST(Superblock, FoundBehindAUserBlock) {
    const TempDir dir;
    const std::string path = dir.file("user_block.h5");
    write_file(path, [](hid_t fcpl, hid_t) { H5Pset_userblock(fcpl, 1024); });
    expect_recorded_end_is_size(path, 0);
}

TEST(Superblock, ATruncatedFileKeepsItsRecordedEndAndOpensOnceExtendedToIt) {
    const TempDir dir;
    const std::string path = dir.file("cut.h5");
    write_file(path);
    const std::uint64_t whole = size_of(path);
    ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(whole - 1000)), 0);
    EXPECT_FALSE(hdf5_opens(path));  // "truncated file: eof = ..., stored_eof = ..."
    EXPECT_EQ(recorded_end_of_file(path), std::optional<std::uint64_t>(whole));
    ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(whole)), 0);
    EXPECT_TRUE(hdf5_opens(path));
}

TEST(Superblock, NoneInAFileThatIsNotHdf5) {
    const TempDir dir;
    const std::string path = dir.file("text.h5");
    std::FILE* text = std::fopen(path.c_str(), "wb");
    ASSERT_NE(text, nullptr);
    for (int i = 0; i < 200; ++i) std::fputs("not an HDF5 file\n", text);
    std::fclose(text);
    EXPECT_EQ(recorded_end_of_file(path), std::nullopt);
    std::fclose(std::fopen(dir.file("empty.h5").c_str(), "wb"));
    EXPECT_EQ(recorded_end_of_file(dir.file("empty.h5")), std::nullopt);
}

TEST(Superblock, AMissingFileIsAnIoError) {
    const TempDir dir;
    try {
        recorded_end_of_file(dir.file("missing.h5"));
        FAIL() << "expected an Error";
    } catch (const Error& error) {
        EXPECT_EQ(error.exit_code(), exit_io);
        EXPECT_NE(std::string(error.what()).find("missing.h5: cannot open it"), std::string::npos) << error.what();
    }
}

}  // namespace
}  // namespace attnbatch::io
