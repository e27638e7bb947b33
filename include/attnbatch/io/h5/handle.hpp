// Move-only ownership of one HDF5 identifier, closed by the H5*close of its kind.
//
// Threading: the HDF5 build we target is not thread-safe. No HDF5 call, including the close
// in a destructor, may run inside an OpenMP parallel region: do all I/O on the master thread
// (MPI_THREAD_FUNNELED is enough) and let the kernels see only plain memory.
#pragma once

#include <hdf5.h>

#include <utility>

namespace attnbatch::io {

template <herr_t (*Close)(hid_t)>
class Handle {
public:
    Handle() noexcept = default;
    explicit Handle(hid_t id) noexcept : id_(id) {}
    Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
    Handle& operator=(Handle&& other) noexcept {
        if (this != &other) {
            reset();
            id_ = std::exchange(other.id_, H5I_INVALID_HID);
        }
        return *this;
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() { reset(); }

    hid_t id() const noexcept { return id_; }
    bool valid() const noexcept { return id_ >= 0; }
    explicit operator bool() const noexcept { return valid(); }

    // Destructors cannot report a failed close; callers that must know (a file about to be
    // renamed) close explicitly through a checked call and then release().
    void reset() noexcept {
        if (id_ >= 0) static_cast<void>(Close(id_));
        id_ = H5I_INVALID_HID;
    }
    hid_t release() noexcept { return std::exchange(id_, H5I_INVALID_HID); }

private:
    hid_t id_ = H5I_INVALID_HID;
};

using FileHandle = Handle<H5Fclose>;
using GroupHandle = Handle<H5Gclose>;
using DatasetHandle = Handle<H5Dclose>;
using DataspaceHandle = Handle<H5Sclose>;
using DatatypeHandle = Handle<H5Tclose>;
using PropertyListHandle = Handle<H5Pclose>;
using AttributeHandle = Handle<H5Aclose>;

}  // namespace attnbatch::io
