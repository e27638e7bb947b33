// The only place that knows HDF5 versions differ (1.10 here; 1.12 and 1.14 elsewhere).
#pragma once

#include "attnbatch/io/h5/dims.hpp"

#include <hdf5.h>

#include <vector>

namespace attnbatch::io::detail {

// Frees the memory HDF5 allocated for variable-length data read into `buffer`.
#if H5_VERSION_GE(1, 12, 0)
inline constexpr const char* reclaim_vlen_call = "H5Treclaim";
inline herr_t reclaim_vlen(hid_t mem_type, hid_t space, void* buffer) {
    return H5Treclaim(mem_type, space, H5P_DEFAULT, buffer);
}
#else
inline constexpr const char* reclaim_vlen_call = "H5Dvlen_reclaim";
inline herr_t reclaim_vlen(hid_t mem_type, hid_t space, void* buffer) {
    return H5Dvlen_reclaim(mem_type, space, H5P_DEFAULT, buffer);
}
#endif

// Whether `path` is an HDF5 file (H5Fis_hdf5 is deprecated from 1.12 on).
#if H5_VERSION_GE(1, 12, 0)
inline constexpr const char* is_hdf5_call = "H5Fis_accessible";
inline htri_t is_hdf5(const char* path) { return H5Fis_accessible(path, H5P_DEFAULT); }
#else
inline constexpr const char* is_hdf5_call = "H5Fis_hdf5";
inline htri_t is_hdf5(const char* path) { return H5Fis_hdf5(path); }
#endif

// hsize_t is unsigned long long up to 1.12 and uint64_t from 1.14 on, while Dims (dims.hpp)
// holds std::uint64_t so that no header above the wrappers needs hdf5.h: the extents of a
// call that takes or fills an hsize_t array, copied.
inline std::vector<hsize_t> extents_of(const Dims& dims) { return std::vector<hsize_t>(dims.begin(), dims.end()); }
inline Dims dims_of(const std::vector<hsize_t>& extents) { return Dims(extents.begin(), extents.end()); }

}  // namespace attnbatch::io::detail
