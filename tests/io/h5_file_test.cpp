// Files: errors carry call, path and HDF5's stack; create never overwrites; the default file
// format is kept; object kinds; locking failures name the cure.
#include "attnbatch/io/h5/h5.hpp"
#include "support/file_bytes.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <stdexcept>

namespace attnbatch::io {
namespace {

using testing::TempDir;

TEST(H5File, OpeningAMissingFileThrowsH5ErrorWithCallPathAndStack) {
    const TempDir dir;
    const std::string path = dir.file("absent.h5");
    try {
        File::open(path, FileMode::read_only);
        FAIL() << "no exception";
    } catch (const H5Error& error) {
        const std::string what = error.what();
        EXPECT_EQ(error.call(), "H5Fopen");
        EXPECT_EQ(error.file(), path);
        EXPECT_FALSE(error.stack().empty());
        EXPECT_NE(what.find("H5Fopen failed on " + path), std::string::npos) << what;
        EXPECT_NE(what.find("unable to open file"), std::string::npos) << what;  // HDF5's own text
        EXPECT_NE(error.stack_text().find("H5Fopen()"), std::string::npos) << error.stack_text();
        EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
        EXPECT_FALSE(error.is_lock_failure());
    }
}

TEST(H5File, CreateRefusesToOverwrite) {
    const TempDir dir;
    const std::string path = dir.file("a.h5");
    File::create(path).close();
    try {
        File::create(path);
        FAIL() << "no exception";
    } catch (const H5Error& error) {
        EXPECT_EQ(error.call(), "H5Fcreate");
        EXPECT_NE(std::string(error.what()).find(path), std::string::npos);
    }
}

TEST(H5File, KeepsTheDefaultSuperblockSoCrashedFilesReopen) {
    const TempDir dir;
    File file = File::create(dir.file("a.h5"));
    H5F_info2_t info{};
    ASSERT_GE(H5Fget_info2(file.id(), &info), 0);
    EXPECT_EQ(info.super.version, 0u);
}

TEST(H5File, ReopensReadWriteAndFlushes) {
    const TempDir dir;
    const std::string path = dir.file("a.h5");
    File::create(path).close();
    File file = File::open(path, FileMode::read_write);
    Group::create(file, "/a/b");
    file.flush();
    file.close();
    EXPECT_FALSE(file.is_open());
    const File again = File::open(path, FileMode::read_only);
    EXPECT_EQ(object_kind(again, "/a/b"), ObjectKind::group);
}

TEST(H5File, ObjectKindWalksThePath) {
    const TempDir dir;
    const File file = File::create(dir.file("a.h5"));
    Group::create(file, "/g");
    Dataset::create(file, "/g/x", Datatype::float32(), {2});
    EXPECT_EQ(object_kind(file, "/"), ObjectKind::group);
    EXPECT_EQ(object_kind(file, "/g"), ObjectKind::group);
    EXPECT_EQ(object_kind(file, "/g/x"), ObjectKind::dataset);
    EXPECT_EQ(object_kind(file, "g/x"), ObjectKind::dataset);
    EXPECT_EQ(object_kind(file, "/g/y"), ObjectKind::missing);
    EXPECT_EQ(object_kind(file, "/nope/y"), ObjectKind::missing);  // H5Lexists alone would fail here
    EXPECT_EQ(root_datasets(file), std::vector<std::string>{});
    Dataset::create(file, "/top", Datatype::int32(), {1});
    EXPECT_EQ(root_datasets(file), std::vector<std::string>{"/top"});
}

TEST(H5File, CloseRefusesWhileObjectsAreOpen) {
    const TempDir dir;
    File file = File::create(dir.file("a.h5"));
    Dataset dataset = Dataset::create(file, "/x", Datatype::float32(), {2});
    EXPECT_THROW(file.close(), std::logic_error);
    dataset.close();
    EXPECT_NO_THROW(file.close());
}

TEST(H5File, IsHdf5TellsGarbageFromHdf5) {
    const TempDir dir;
    testing::write_text(dir.file("junk.h5"), "this is not HDF5 at all, just bytes");
    File::create(dir.file("real.h5")).close();
    EXPECT_FALSE(is_hdf5_file(dir.file("junk.h5")));
    EXPECT_TRUE(is_hdf5_file(dir.file("real.h5")));
    EXPECT_THROW(is_hdf5_file(dir.file("missing.h5")), H5Error);
}

TEST(H5File, LockFailureCarriesTheFileLockingHint) {
    const TempDir dir;
    const std::string path = dir.file("locked.h5");
    File::create(path).close();
    // HDF5 locks with flock(); a lock held through another open file description conflicts
    // even within this process, like a writer in another process would.
    const int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
    try {
        File::open(path, FileMode::read_write);
        ADD_FAILURE() << "no exception (file locking disabled in this environment?)";
    } catch (const H5Error& error) {
        EXPECT_TRUE(error.is_lock_failure()) << error.what();
        EXPECT_NE(std::string(error.what()).find("HDF5_USE_FILE_LOCKING=FALSE"), std::string::npos) << error.what();
    }
    ::close(fd);
}

// The default access is this process alone (HDF5's own driver); MPI-IO access is
// io.mpi.CollectiveOutput's.
TEST(H5File, DefaultAccessIsThisProcessAlone) {
    const TempDir dir;
    const FileAccess access;
    EXPECT_EQ(access.setup(), nullptr);
    File file = File::create(dir.file("a.h5"), access);
    EXPECT_FALSE(file.uses_mpi_io());
    file.close();
    EXPECT_FALSE(File::open(dir.file("a.h5"), FileMode::read_only, access).uses_mpi_io());
}

}  // namespace
}  // namespace attnbatch::io
