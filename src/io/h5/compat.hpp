// The only place that knows HDF5 versions differ (1.10 here; 1.12 and 1.14 elsewhere).
#pragma once

#include <hdf5.h>

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

}  // namespace attnbatch::io::detail
