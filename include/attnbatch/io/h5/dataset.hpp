// Datasets: create (chunking, gzip with shuffle, fill value), open, query shape and type,
// and move hyperslabs between the file and caller memory with HDF5 converting the element
// type (a float64 dataset read into float memory arrives as float).
//
// Collective I/O: every read and write takes a Transfer (transfer.hpp). A selection with a
// zero count still calls H5Dread/H5Dwrite with an empty (H5Sselect_none) selection, as
// collective calls require from ranks that have nothing to move.
#pragma once

#include "attnbatch/io/h5/dims.hpp"
#include "attnbatch/io/h5/error.hpp"
#include "attnbatch/io/h5/file.hpp"
#include "attnbatch/io/h5/handle.hpp"
#include "attnbatch/io/h5/transfer.hpp"
#include "attnbatch/io/h5/types.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnbatch::io {

struct DatasetCreation {
    Dims chunk;           // empty: contiguous layout
    int gzip_level = 0;   // 1-9: shuffle then deflate (needs chunk); 0: no filter
    bool has_fill = false;
    double fill_value = 0.0;  // converted by HDF5 to the file type
    // Storage placed at creation rather than at first write: later writes then change no
    // metadata, and where everything lies no longer depends on the order of the writes.
    bool allocate_early = false;
    // No fill value is ever written (H5D_FILL_TIME_NEVER): for datasets whose every element
    // the writer stores, where filling early storage would write every byte twice. Elements
    // never written read as whatever the file holds there (zeros in a new file's unwritten
    // space).
    bool fill_never = false;
};

class Dataset {
public:
    // Creates `path` (and missing intermediate groups) with the given file type and fixed dims.
    static Dataset create(const File& file, const std::string& path, const Datatype& type, const Dims& dims,
                          const DatasetCreation& creation = {});
    static Dataset open(const File& file, const std::string& path);

    hid_t id() const noexcept { return handle_.id(); }
    const Where& where() const noexcept { return where_; }
    const std::string& path() const noexcept { return where_.object; }

    Dims dims() const;
    TypeInfo type_info() const;
    Dims chunk() const;                 // empty when not chunked
    // Where the elements lie in the file one after another, as stored: the offset of the first
    // (contiguous layout, storage allocated in the file itself, not external); none otherwise.
    std::optional<std::uint64_t> contiguous_offset() const;
    // Whether the stored type is IEEE binary32 little-endian: bytes a float can be read from.
    bool stored_as_float32le() const;
    std::vector<int> filters() const;   // H5Z filter ids in pipeline order (H5Z_FILTER_SHUFFLE, ...)
    // The filters of filters() that this HDF5 library cannot apply (neither built in nor
    // found as a plugin on HDF5_PLUGIN_PATH): reading the data would fail.
    std::vector<int> unavailable_filters() const;
    void close();                       // checked H5Dclose

private:
    Dataset(hid_t id, Where where) : handle_(id), where_(std::move(where)) {}
    DatasetHandle handle_;
    Where where_;
};

// The rows [first, first + count) of the leading axis, every other axis whole.
Slab rows_slab(const Dataset& dataset, std::uint64_t first, std::uint64_t count);

// `elements` is the capacity of the caller's buffer; a selection larger than it, or outside
// the dataset, throws std::invalid_argument before any HDF5 call.
void read_slab(const Dataset& dataset, const Slab& slab, MemType type, void* out, std::size_t elements,
               Transfer transfer = Transfer::independent);
void write_slab(const Dataset& dataset, const Slab& slab, MemType type, const void* in, std::size_t elements,
                Transfer transfer = Transfer::independent);

template <class T>
void read_slab(const Dataset& dataset, const Slab& slab, T* out, std::size_t elements,
               Transfer transfer = Transfer::independent) {
    read_slab(dataset, slab, mem_type_of<T>(), out, elements, transfer);
}
template <class T>
void write_slab(const Dataset& dataset, const Slab& slab, const T* in, std::size_t elements,
                Transfer transfer = Transfer::independent) {
    write_slab(dataset, slab, mem_type_of<T>(), in, elements, transfer);
}
template <class T>
void read_rows(const Dataset& dataset, std::uint64_t first, std::uint64_t count, T* out, std::size_t elements,
               Transfer transfer = Transfer::independent) {
    read_slab(dataset, rows_slab(dataset, first, count), mem_type_of<T>(), out, elements, transfer);
}
template <class T>
void write_rows(const Dataset& dataset, std::uint64_t first, std::uint64_t count, const T* in, std::size_t elements,
                Transfer transfer = Transfer::independent) {
    write_slab(dataset, rows_slab(dataset, first, count), mem_type_of<T>(), in, elements, transfer);
}

// A union of disjoint boxes (each with its offset and count) moved in one H5Dread/H5Dwrite:
// the elements go in the row-major order of the dataset's index space, so boxes that follow
// each other along the leading axis fill memory one after the other. Boxes with no element
// are skipped; no box at all selects nothing, still in one call (as collective I/O needs).
// The buffer holds exactly the selected elements (`elements` of them).
void read_boxes(const Dataset& dataset, const std::vector<Slab>& boxes, MemType type, void* out, std::size_t elements,
                Transfer transfer = Transfer::independent);
void write_boxes(const Dataset& dataset, const std::vector<Slab>& boxes, MemType type, const void* in,
                 std::size_t elements, Transfer transfer = Transfer::independent);

template <class T>
std::vector<T> read_all(const Dataset& dataset) {
    const Dims dims = dataset.dims();
    std::vector<T> values(element_count(dims));
    read_slab(dataset, Slab{}, mem_type_of<T>(), values.data(), values.size());
    return values;
}

// A scalar UTF-8 string dataset, for text longer than an attribute may hold (the ~64 KiB
// limit). Written fixed-length (parallel HDF5 cannot write variable-length data; h5py reads
// it with .asstr()); reading accepts variable- and fixed-length strings.
void write_text_dataset(const File& file, const std::string& path, const std::string& text);
std::string read_text_dataset(const File& file, const std::string& path);

// Dimension labels through the HDF5 dimension-scales API (h5py: ds.dims[i].label).
void set_dimension_labels(const Dataset& dataset, const std::vector<std::string>& labels);
std::vector<std::string> dimension_labels(const Dataset& dataset);

// Dimension scales, which netCDF readers (xarray's h5netcdf engine) take the axes' names from:
// a 1-D dataset `name` of `length` marked as a netCDF dimension without values, and its
// attachment to an axis of a dataset. Collective under MPI-IO, like every creation.
Dataset create_dimension_scale(const File& file, const std::string& name, std::uint64_t length);
void attach_dimension_scale(const Dataset& dataset, const Dataset& scale, unsigned axis);
// The name of the scale attached to each axis, "" where none is.
std::vector<std::string> dimension_scale_names(const Dataset& dataset);

}  // namespace attnbatch::io
