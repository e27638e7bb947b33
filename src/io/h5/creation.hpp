// The property lists every object this layer creates shares: links create the groups above
// them, and object headers carry no modification times (the same data then makes the same
// file bytes, which resumed outputs rely on).
#pragma once

#include "attnbatch/io/h5/handle.hpp"
#include "h5/check.hpp"

namespace attnbatch::io::detail {

inline PropertyListHandle intermediate_groups(const Where& where) {
    PropertyListHandle lcpl(H5_CALL(H5Pcreate, where, H5P_LINK_CREATE));
    H5_CALL(H5Pset_create_intermediate_group, where, lcpl.id(), 1u);
    return lcpl;
}

// `type`: H5P_DATASET_CREATE or H5P_GROUP_CREATE.
inline PropertyListHandle untimed_creation(const Where& where, hid_t type) {
    PropertyListHandle plist(H5_CALL(H5Pcreate, where, type));
    H5_CALL(H5Pset_obj_track_times, where, plist.id(), false);
    return plist;
}

}  // namespace attnbatch::io::detail
