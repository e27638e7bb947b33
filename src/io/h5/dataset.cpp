// Dataset creation, shape and type queries, and hyperslab transfers.
#include "attnbatch/io/h5/dataset.hpp"

#include "h5/check.hpp"
#include "h5/compat.hpp"
#include "h5/creation.hpp"
#include "h5/strings.hpp"
#include "h5/transfer_list.hpp"
#include "h5/type_info_of.hpp"
#include "h5/object_paths.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>

namespace attnbatch::io {

namespace {

using detail::intermediate_groups;
using detail::untimed_creation;

DataspaceHandle simple_space(const Dims& dims, const Where& where) {
    if (dims.empty()) return DataspaceHandle(H5_CALL(H5Screate, where, H5S_SCALAR));
    return DataspaceHandle(
        H5_CALL(H5Screate_simple, where, static_cast<int>(dims.size()), detail::extents_of(dims).data(), nullptr));
}

// A memory type id, owning it when it is not predefined (the half type).
struct MemoryType {
    hid_t id = H5I_INVALID_HID;
    std::optional<Datatype> owned;
};

MemoryType memory_type(MemType type) {
    MemoryType mem;
    switch (type) {
        case MemType::f32: mem.id = H5T_NATIVE_FLOAT; break;
        case MemType::f64: mem.id = H5T_NATIVE_DOUBLE; break;
        case MemType::i32: mem.id = H5T_NATIVE_INT32; break;
        case MemType::i64: mem.id = H5T_NATIVE_INT64; break;
        case MemType::f16_bits:
            mem.owned.emplace(Datatype::float16());
            mem.id = mem.owned->id();
            break;
        case MemType::bf16_bits:
            mem.owned.emplace(Datatype::bfloat16());
            mem.id = mem.owned->id();
            break;
    }
    return mem;
}

std::string describe(const Where& where) { return where.file + ":" + where.object; }


// A box of the dataset's rank inside its extent; std::invalid_argument naming `what` otherwise.
void check_box(const Where& where, const Dims& dims, const Slab& box, const char* what) {
    if (box.offset.size() != dims.size() || box.count.size() != dims.size()) {
        throw std::invalid_argument(describe(where) + ": " + what + " of rank " + std::to_string(box.count.size()) +
                                    " on a dataset of rank " + std::to_string(dims.size()));
    }
    for (std::size_t axis = 0; axis < dims.size(); ++axis) {
        if (box.offset[axis] > dims[axis] || box.count[axis] > dims[axis] - box.offset[axis]) {
            throw std::invalid_argument(describe(where) + ": " + what + " offset " + shape_text(box.offset) + " count " +
                                        shape_text(box.count) + " exceeds shape " + shape_text(dims));
        }
    }
}

// The file and memory dataspaces of one transfer, after checking the slab against the
// dataset's extent and the caller's buffer.
struct Selection {
    DataspaceHandle file_space;
    DataspaceHandle mem_space;
};

Selection select(const Dataset& dataset, const Slab& slab, std::size_t capacity) {
    const Where& where = dataset.where();
    const Dims dims = dataset.dims();
    Slab box = slab;
    if (box.offset.empty() && box.count.empty()) {
        box.offset.assign(dims.size(), 0);
        box.count = dims;
    }
    check_box(where, dims, box, "selection");
    const std::size_t elements = element_count(box.count);
    if (elements > capacity) {
        throw std::invalid_argument(describe(where) + ": selection of " + std::to_string(elements) +
                                    " elements does not fit a buffer of " + std::to_string(capacity));
    }
    Selection selection{DataspaceHandle(H5_CALL(H5Dget_space, where, dataset.id())), {}};
    if (dims.empty()) {  // scalar dataset: nothing to select
        selection.mem_space = DataspaceHandle(H5_CALL(H5Screate, where, H5S_SCALAR));
    } else if (elements == 0) {
        // Collective transfers need every rank in the call, so an empty share is an empty
        // selection rather than a skipped call.
        H5_CALL(H5Sselect_none, where, selection.file_space.id());
        const hsize_t zero = 0;
        selection.mem_space = DataspaceHandle(H5_CALL(H5Screate_simple, where, 1, &zero, nullptr));
        H5_CALL(H5Sselect_none, where, selection.mem_space.id());
    } else {
        H5_CALL(H5Sselect_hyperslab, where, selection.file_space.id(), H5S_SELECT_SET, detail::extents_of(box.offset).data(),
                nullptr, detail::extents_of(box.count).data(), nullptr);
        selection.mem_space = simple_space(box.count, where);
    }
    return selection;
}

}  // namespace

Dataset Dataset::create(const File& file, const std::string& path, const Datatype& type, const Dims& dims,
                        const DatasetCreation& creation) {
    const Where where{file.path(), detail::absolute_object_path(path)};
    const DataspaceHandle space = simple_space(dims, where);
    const PropertyListHandle dcpl = untimed_creation(where, H5P_DATASET_CREATE);
    if (!creation.chunk.empty()) {
        H5_CALL(H5Pset_chunk, where, dcpl.id(), static_cast<int>(creation.chunk.size()), detail::extents_of(creation.chunk).data());
    }
    if (creation.gzip_level > 0) {
        if (creation.chunk.empty()) throw std::invalid_argument(describe(where) + ": gzip needs a chunked layout");
        // Shuffle first: grouping the bytes of each significance compresses floats far better.
        H5_CALL(H5Pset_shuffle, where, dcpl.id());
        H5_CALL(H5Pset_deflate, where, dcpl.id(), static_cast<unsigned>(creation.gzip_level));
    }
    if (creation.has_fill) {
        H5_CALL(H5Pset_fill_value, where, dcpl.id(), H5T_NATIVE_DOUBLE, &creation.fill_value);
    }
    if (creation.allocate_early) H5_CALL(H5Pset_alloc_time, where, dcpl.id(), H5D_ALLOC_TIME_EARLY);
    if (creation.fill_never) H5_CALL(H5Pset_fill_time, where, dcpl.id(), H5D_FILL_TIME_NEVER);
    const PropertyListHandle lcpl = intermediate_groups(where);
    const hid_t id = H5_CALL(H5Dcreate2, where, file.id(), where.object.c_str(), type.id(), space.id(), lcpl.id(),
                             dcpl.id(), H5P_DEFAULT);
    return Dataset(id, where);
}

Dataset Dataset::open(const File& file, const std::string& path) {
    const Where where{file.path(), detail::absolute_object_path(path)};
    return Dataset(H5_CALL(H5Dopen2, where, file.id(), where.object.c_str(), H5P_DEFAULT), where);
}

Dims Dataset::dims() const {
    const DataspaceHandle space(H5_CALL(H5Dget_space, where_, id()));
    const int rank = H5_CALL(H5Sget_simple_extent_ndims, where_, space.id());
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    if (rank > 0) H5_CALL(H5Sget_simple_extent_dims, where_, space.id(), dims.data(), nullptr);
    return detail::dims_of(dims);
}

TypeInfo Dataset::type_info() const {
    const DatatypeHandle type(H5_CALL(H5Dget_type, where_, id()));
    return detail::type_info_of(type.id(), where_);
}

Dims Dataset::chunk() const {
    const PropertyListHandle dcpl(H5_CALL(H5Dget_create_plist, where_, id()));
    if (H5_CALL(H5Pget_layout, where_, dcpl.id()) != H5D_CHUNKED) return {};
    std::vector<hsize_t> chunk(dims().size());
    H5_CALL(H5Pget_chunk, where_, dcpl.id(), static_cast<int>(chunk.size()), chunk.data());
    return detail::dims_of(chunk);
}

std::optional<std::uint64_t> Dataset::contiguous_offset() const {
    const PropertyListHandle dcpl(H5_CALL(H5Dget_create_plist, where_, id()));
    if (H5_CALL(H5Pget_layout, where_, dcpl.id()) != H5D_CONTIGUOUS) return std::nullopt;
    if (H5_CALL(H5Pget_external_count, where_, dcpl.id()) != 0) return std::nullopt;
    // Not an error to ask: HADDR_UNDEF where no storage is allocated (H5Dget_offset adds a
    // user block's size, so the offset is the file's own).
    const haddr_t offset = H5Dget_offset(id());
    if (offset == HADDR_UNDEF) return std::nullopt;
    return static_cast<std::uint64_t>(offset);
}

bool Dataset::stored_as_float32le() const {
    const DatatypeHandle type(H5_CALL(H5Dget_type, where_, id()));
    return H5_CALL(H5Tequal, where_, type.id(), H5T_IEEE_F32LE) > 0;
}

std::vector<int> Dataset::filters() const {
    const PropertyListHandle dcpl(H5_CALL(H5Dget_create_plist, where_, id()));
    const int count = H5_CALL(H5Pget_nfilters, where_, dcpl.id());
    std::vector<int> filters;
    for (int i = 0; i < count; ++i) {
        unsigned flags = 0;
        std::size_t values = 0;
        unsigned config = 0;
        filters.push_back(H5_CALL(H5Pget_filter2, where_, dcpl.id(), static_cast<unsigned>(i), &flags, &values,
                                  nullptr, 0, nullptr, &config));
    }
    return filters;
}

std::vector<int> Dataset::unavailable_filters() const {
    std::vector<int> missing;
    for (const int filter : filters()) {
        if (H5_CALL(H5Zfilter_avail, where_, static_cast<H5Z_filter_t>(filter)) <= 0) missing.push_back(filter);
    }
    return missing;
}

void Dataset::close() {
    if (handle_.valid()) H5_CALL(H5Dclose, where_, handle_.release());
}

Slab rows_slab(const Dataset& dataset, std::uint64_t first, std::uint64_t count) {
    Slab slab{Dims(), dataset.dims()};
    if (slab.count.empty()) throw std::invalid_argument(describe(dataset.where()) + ": a scalar has no rows");
    slab.offset.assign(slab.count.size(), 0);
    slab.offset[0] = first;
    slab.count[0] = count;
    return slab;
}

void read_slab(const Dataset& dataset, const Slab& slab, MemType type, void* out, std::size_t elements,
               Transfer transfer) {
    const Selection selection = select(dataset, slab, elements);
    const MemoryType mem = memory_type(type);
    H5_CALL(H5Dread, dataset.where(), dataset.id(), mem.id, selection.mem_space.id(), selection.file_space.id(),
            detail::transfer_list(transfer), out);
}

void write_slab(const Dataset& dataset, const Slab& slab, MemType type, const void* in, std::size_t elements,
                Transfer transfer) {
    const Selection selection = select(dataset, slab, elements);
    const MemoryType mem = memory_type(type);
    H5_CALL(H5Dwrite, dataset.where(), dataset.id(), mem.id, selection.mem_space.id(), selection.file_space.id(),
            detail::transfer_list(transfer), in);
}

namespace {

Selection select_boxes(const Dataset& dataset, const std::vector<Slab>& boxes, std::size_t elements) {
    const Where& where = dataset.where();
    const Dims dims = dataset.dims();
    Selection selection{DataspaceHandle(H5_CALL(H5Dget_space, where, dataset.id())), {}};
    H5_CALL(H5Sselect_none, where, selection.file_space.id());
    std::size_t selected = 0;
    for (const Slab& box : boxes) {
        check_box(where, dims, box, "box");
        const std::size_t count = element_count(box.count);
        if (count == 0) continue;
        // The first box set, not or-ed onto "none": one box stays a regular hyperslab, which
        // HDF5 moves much faster than a general span selection.
        H5_CALL(H5Sselect_hyperslab, where, selection.file_space.id(), selected == 0 ? H5S_SELECT_SET : H5S_SELECT_OR,
                detail::extents_of(box.offset).data(), nullptr, detail::extents_of(box.count).data(), nullptr);
        selected += count;
    }
    if (selected != elements) {
        throw std::invalid_argument(describe(where) + ": boxes of " + std::to_string(selected) + " elements for a buffer of " +
                                    std::to_string(elements));
    }
    // One box: memory shaped like it, which HDF5 maps onto the chunks many times faster than
    // a flat buffer (it then works box to box rather than element by element).
    const auto filled = std::count_if(boxes.begin(), boxes.end(), [](const Slab& box) { return element_count(box.count) > 0; });
    if (filled == 1) {
        const Slab& box = *std::find_if(boxes.begin(), boxes.end(), [](const Slab& b) { return element_count(b.count) > 0; });
        selection.mem_space = simple_space(box.count, where);
        return selection;
    }
    const hsize_t extent = std::max<hsize_t>(selected, 1);
    selection.mem_space = DataspaceHandle(H5_CALL(H5Screate_simple, where, 1, &extent, nullptr));
    if (selected == 0) H5_CALL(H5Sselect_none, where, selection.mem_space.id());
    return selection;
}

}  // namespace

void read_boxes(const Dataset& dataset, const std::vector<Slab>& boxes, MemType type, void* out, std::size_t elements,
                Transfer transfer) {
    const Selection selection = select_boxes(dataset, boxes, elements);
    const MemoryType mem = memory_type(type);
    H5_CALL(H5Dread, dataset.where(), dataset.id(), mem.id, selection.mem_space.id(), selection.file_space.id(),
            detail::transfer_list(transfer), out);
}

void write_boxes(const Dataset& dataset, const std::vector<Slab>& boxes, MemType type, const void* in,
                 std::size_t elements, Transfer transfer) {
    const Selection selection = select_boxes(dataset, boxes, elements);
    const MemoryType mem = memory_type(type);
    H5_CALL(H5Dwrite, dataset.where(), dataset.id(), mem.id, selection.mem_space.id(), selection.file_space.id(),
            detail::transfer_list(transfer), in);
}

void write_text_dataset(const File& file, const std::string& path, const std::string& text) {
    const Where where{file.path(), detail::absolute_object_path(path)};
    // Fixed length, not variable: parallel HDF5 cannot write variable-length data, and the
    // text is written once, so its length is known.
    const std::string stored = text.empty() ? std::string(1, '\0') : text;
    const DatatypeHandle type(H5_CALL(H5Tcopy, where, H5T_C_S1));
    H5_CALL(H5Tset_size, where, type.id(), stored.size());
    H5_CALL(H5Tset_strpad, where, type.id(), H5T_STR_NULLPAD);
    H5_CALL(H5Tset_cset, where, type.id(), H5T_CSET_UTF8);
    const DataspaceHandle space(H5_CALL(H5Screate, where, H5S_SCALAR));
    const PropertyListHandle lcpl = intermediate_groups(where);
    const PropertyListHandle dcpl = untimed_creation(where, H5P_DATASET_CREATE);
    const DatasetHandle dataset(H5_CALL(H5Dcreate2, where, file.id(), where.object.c_str(), type.id(), space.id(),
                                        lcpl.id(), dcpl.id(), H5P_DEFAULT));
    H5_CALL(H5Dwrite, where, dataset.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, stored.data());
}

std::string read_text_dataset(const File& file, const std::string& path) {
    const Dataset dataset = Dataset::open(file, path);
    const Where& where = dataset.where();
    const DatatypeHandle type(H5_CALL(H5Dget_type, where, dataset.id()));
    const DataspaceHandle space(H5_CALL(H5Dget_space, where, dataset.id()));
    return detail::read_string(
        type.id(), space.id(),
        [&](hid_t mem_type, void* buffer) { return H5Dread(dataset.id(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer); },
        "H5Dread", where);
}

}  // namespace attnbatch::io
