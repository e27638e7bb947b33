// Unreadable compressed chunks replaced by stored chunks of zeros.
#include "attnbatch/io/h5/chunk_repair.hpp"

#include "attnbatch/io/h5/chunk_indices.hpp"

#include "check.hpp"

#include <hdf5.h>

#include <algorithm>
#include <vector>

namespace attnbatch::io {
namespace {

// The bytes HDF5 stores for one chunk of zeros of `dataset` (its chunk shape, type and filters),
// made by HDF5 itself in a file held in memory: no filter is applied here by hand, and a chunk
// cut by the dataset's end is stored whole like any other.
std::vector<unsigned char> stored_zero_chunk(const Dataset& dataset, hid_t type, const std::vector<hsize_t>& chunk,
                                             const std::vector<unsigned char>& zeros) {
    const Where& where = dataset.where();
    const PropertyListHandle access(H5_CALL(H5Pcreate, where, H5P_FILE_ACCESS));
    H5_CALL(H5Pset_fapl_core, where, access.id(), zeros.size() + (1u << 16), false);  // never on a disk
    const FileHandle file(H5_CALL(H5Fcreate, where, "zero-chunk", H5F_ACC_TRUNC, H5P_DEFAULT, access.id()));
    const PropertyListHandle creation(H5_CALL(H5Dget_create_plist, where, dataset.id()));
    const DataspaceHandle space(H5_CALL(H5Screate_simple, where, static_cast<int>(chunk.size()), chunk.data(), nullptr));
    const DatasetHandle zeros_set(
        H5_CALL(H5Dcreate2, where, file.id(), "zeros", type, space.id(), H5P_DEFAULT, creation.id(), H5P_DEFAULT));
    H5_CALL(H5Dwrite, where, zeros_set.id(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data());
    H5_CALL(H5Dflush, where, zeros_set.id());
    const std::vector<hsize_t> origin(chunk.size(), 0);
    hsize_t bytes = 0;
    H5_CALL(H5Dget_chunk_storage_size, where, zeros_set.id(), origin.data(), &bytes);
    std::vector<unsigned char> stored(bytes);
    std::uint32_t filter_mask = 0;
    H5_CALL(H5Dread_chunk, where, zeros_set.id(), H5P_DEFAULT, origin.data(), &filter_mask, stored.data());
    return stored;
}

}  // namespace

void add_chunks_of(const Dims& dims, const Dims& chunk, const Slab& slab, ChunkIndices& chunks) {
    const std::size_t rank = dims.size();
    Dims first(rank), last(rank);
    for (std::size_t axis = 0; axis < rank; ++axis) {
        const std::uint64_t offset = slab.offset.empty() ? 0 : slab.offset[axis];
        const std::uint64_t count = slab.count.empty() ? dims[axis] : slab.count[axis];
        if (count == 0) return;
        first[axis] = offset / chunk[axis];
        last[axis] = (offset + count - 1) / chunk[axis];
    }
    Dims index = first;
    while (true) {
        chunks.insert(index);
        std::size_t axis = rank;
        while (axis > 0 && index[axis - 1] == last[axis - 1]) {
            index[axis - 1] = first[axis - 1];
            --axis;
        }
        if (axis == 0) return;
        ++index[axis - 1];
    }
}

std::size_t reset_unreadable_chunks(const Dataset& dataset, const ChunkIndices& read_back) {
    if (dataset.filters().empty()) return 0;
    const Where& where = dataset.where();
    const hid_t id = dataset.id();
    const Dims dims = dataset.dims();
    const Dims chunk_dims = dataset.chunk();
    const std::vector<hsize_t> chunk(chunk_dims.begin(), chunk_dims.end());
    const std::size_t rank = dims.size();
    const DatatypeHandle type(H5_CALL(H5Dget_type, where, id));
    const std::size_t element_bytes = H5_CALL(H5Tget_size, where, type.id());
    const std::size_t chunk_bytes = element_count(chunk_dims) * element_bytes;

    // Every chunk of the grid by its coordinates: H5Dget_chunk_info walks the index from its start
    // for each chunk number, which made this quadratic (78 s for 40000 chunks). A chunk never
    // stored reads as the fill, without error; the outputs allocate every chunk at creation.
    const DataspaceHandle file_space(H5_CALL(H5Dget_space, where, id));
    Dims grid(rank);
    for (std::size_t axis = 0; axis < rank; ++axis) grid[axis] = (dims[axis] + chunk[axis] - 1) / chunk[axis];
    if (element_count(grid) == 0) return 0;
    std::vector<unsigned char> values(chunk_bytes);
    const std::vector<unsigned char> zeros(chunk_bytes, 0);
    std::vector<unsigned char> replacement;
    std::size_t replaced = 0;
    Dims index(rank, 0);
    std::vector<hsize_t> origin(rank), count(rank);
    while (true) {
        if (read_back.count(index) == 0) {
            for (std::size_t axis = 0; axis < rank; ++axis) {
                origin[axis] = index[axis] * chunk[axis];
                count[axis] = std::min<hsize_t>(chunk[axis], dims[axis] - origin[axis]);  // edge chunks are cut
            }
            H5_CALL(H5Sselect_hyperslab, where, file_space.id(), H5S_SELECT_SET, origin.data(), nullptr, count.data(), nullptr);
            const DataspaceHandle memory_space(H5_CALL(H5Screate_simple, where, static_cast<int>(rank), count.data(), nullptr));
            if (H5Dread(id, type.id(), memory_space.id(), file_space.id(), H5P_DEFAULT, values.data()) < 0) {
                H5Eclear2(H5E_DEFAULT);
                if (replacement.empty()) replacement = stored_zero_chunk(dataset, type.id(), chunk, zeros);
                H5_CALL(H5Dwrite_chunk, where, id, H5P_DEFAULT, 0u, origin.data(), replacement.size(), replacement.data());
                ++replaced;
            }
        }
        std::size_t axis = rank;
        while (axis > 0 && index[axis - 1] + 1 == grid[axis - 1]) index[--axis] = 0;
        if (axis == 0) return replaced;
        ++index[axis - 1];
    }
}

}  // namespace attnbatch::io
