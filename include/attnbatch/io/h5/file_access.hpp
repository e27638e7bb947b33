// How a file is reached, without hdf5.h: by this process alone (the default), or by every
// rank of an MPI communicator together (mpi_io_access(), mpi_io.hpp). What that means for
// HDF5's file-access property list stays inside io.
#pragma once

#include <memory>
#include <utility>

namespace attnbatch::io {

enum class FileMode { read_only, read_write };

namespace detail {
struct AccessSetup;  // src/io/h5/access_setup.hpp
}

class FileAccess {
public:
    FileAccess() noexcept = default;  // this process alone
    explicit FileAccess(std::shared_ptr<const detail::AccessSetup> setup) noexcept : setup_(std::move(setup)) {}

    const detail::AccessSetup* setup() const noexcept { return setup_.get(); }  // null: this process alone

private:
    std::shared_ptr<const detail::AccessSetup> setup_;
};

}  // namespace attnbatch::io
