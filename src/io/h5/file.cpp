// Files and groups, and finding out what a path names.
#include "attnbatch/io/h5/file.hpp"

#include "h5/access_setup.hpp"
#include "h5/check.hpp"
#include "h5/creation.hpp"
#include "h5/compat.hpp"
#include "h5/object_paths.hpp"

#include <stdexcept>

namespace attnbatch::io {
namespace {

PropertyListHandle file_access_list(const FileAccess& access, const FileTuning& tuning, const Where& where) {
    PropertyListHandle fapl(H5_CALL(H5Pcreate, where, H5P_FILE_ACCESS));
    if (access.setup()) access.setup()->configure(fapl.id());
    if (tuning.alignment > 0) H5_CALL(H5Pset_alignment, where, fapl.id(), tuning.alignment, tuning.alignment);
    if (!tuning.chunk_cache) {
        int metadata_elements = 0;  // unused since HDF5 1.8, kept as it is
        size_t slots = 0, bytes = 0;
        double preemption = 0.0;
        H5_CALL(H5Pget_cache, where, fapl.id(), &metadata_elements, &slots, &bytes, &preemption);
        H5_CALL(H5Pset_cache, where, fapl.id(), metadata_elements, 0, 0, preemption);
    }
    return fapl;
}

}  // namespace

File File::create(const std::string& path, const FileAccess& access, const FileTuning& tuning) {
    detail::quiet_hdf5_errors();
    const Where where{path, "/"};
    const PropertyListHandle fapl = file_access_list(access, tuning, where);
    PropertyListHandle fcpl(H5_CALL(H5Pcreate, where, H5P_FILE_CREATE));
    if (!tuning.reuse_freed_space) {
        H5_CALL(H5Pset_file_space_strategy, where, fcpl.id(), H5F_FSPACE_STRATEGY_NONE, 0, 1);
    }
    return File(H5_CALL(H5Fcreate, where, path.c_str(), H5F_ACC_EXCL, fcpl.id(), fapl.id()), path);
}

File File::open(const std::string& path, FileMode mode, const FileAccess& access, const FileTuning& tuning) {
    detail::quiet_hdf5_errors();
    const Where where{path, "/"};
    const PropertyListHandle fapl = file_access_list(access, tuning, where);
    const unsigned flags = mode == FileMode::read_write ? H5F_ACC_RDWR : H5F_ACC_RDONLY;
    return File(H5_CALL(H5Fopen, where, path.c_str(), flags, fapl.id()), path);
}

void File::flush() { H5_CALL(H5Fflush, where_, id(), H5F_SCOPE_GLOBAL); }

bool File::uses_mpi_io() const {
#if defined(H5_HAVE_PARALLEL)
    const PropertyListHandle fapl(H5_CALL(H5Fget_access_plist, where_, id()));
    return H5_CALL(H5Pget_driver, where_, fapl.id()) == H5FD_MPIO;
#else
    return false;
#endif
}

void File::close() {
    if (!handle_.valid()) return;
    // With the default (weak) close degree HDF5 would keep the file open behind our back
    // while any object is open; a caller about to fsync and rename must know.
    const ssize_t open_objects = H5_CALL(H5Fget_obj_count, where_, id(),
                                         H5F_OBJ_DATASET | H5F_OBJ_GROUP | H5F_OBJ_DATATYPE | H5F_OBJ_ATTR |
                                             H5F_OBJ_LOCAL);
    if (open_objects > 0) {
        throw std::logic_error(where_.file + ": closing the file while " + std::to_string(open_objects) +
                               " of its objects are still open");
    }
    H5_CALL(H5Fclose, where_, handle_.release());
}

Group Group::create(const File& file, const std::string& path) {
    const Where where{file.path(), detail::absolute_object_path(path)};
    const PropertyListHandle lcpl = detail::intermediate_groups(where);
    const PropertyListHandle gcpl = detail::untimed_creation(where, H5P_GROUP_CREATE);
    const hid_t id = H5_CALL(H5Gcreate2, where, file.id(), where.object.c_str(), lcpl.id(), gcpl.id(), H5P_DEFAULT);
    return Group(id, where);
}

Group Group::open(const File& file, const std::string& path) {
    const Where where{file.path(), detail::absolute_object_path(path)};
    return Group(H5_CALL(H5Gopen2, where, file.id(), where.object.c_str(), H5P_DEFAULT), where);
}

bool is_hdf5_file(const std::string& path) {
    detail::quiet_hdf5_errors();
    return detail::checked(detail::is_hdf5(path.c_str()), detail::is_hdf5_call, Where{path, "/"}) > 0;
}

ObjectKind object_kind(const File& file, const std::string& path) {
    const std::string full = detail::absolute_object_path(path);
    const Where where{file.path(), full};
    // H5Lexists fails rather than answering "no" when an intermediate group is absent, so
    // walk the path one component at a time.
    for (std::size_t slash = full.find('/', 1); ; slash = full.find('/', slash + 1)) {
        const std::string prefix = full.substr(0, slash);
        if (prefix.size() > 1) {
            if (H5_CALL(H5Lexists, where, file.id(), prefix.c_str(), H5P_DEFAULT) <= 0) return ObjectKind::missing;
            if (H5_CALL(H5Oexists_by_name, where, file.id(), prefix.c_str(), H5P_DEFAULT) <= 0) {
                return ObjectKind::missing;  // a dangling soft link
            }
        }
        if (slash == std::string::npos) break;
    }
    const Handle<H5Oclose> object(H5_CALL(H5Oopen, where, file.id(), full.c_str(), H5P_DEFAULT));
    switch (H5_CALL(H5Iget_type, where, object.id())) {
        case H5I_GROUP: return ObjectKind::group;
        case H5I_DATASET: return ObjectKind::dataset;
        case H5I_DATATYPE: return ObjectKind::named_datatype;
        default: return ObjectKind::other;
    }
}

std::vector<std::string> root_datasets(const File& file) {
    const Where& where = file.where();
    H5G_info_t info;
    H5_CALL(H5Gget_info, where, file.id(), &info);
    std::vector<std::string> names;
    for (hsize_t i = 0; i < info.nlinks; ++i) {
        const ssize_t length =
            H5_CALL(H5Lget_name_by_idx, where, file.id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
        std::string name(static_cast<std::size_t>(length) + 1, '\0');
        H5_CALL(H5Lget_name_by_idx, where, file.id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(),
                H5P_DEFAULT);
        name.resize(static_cast<std::size_t>(length));
        if (object_kind(file, "/" + name) == ObjectKind::dataset) names.push_back("/" + name);
    }
    return names;
}

}  // namespace attnbatch::io
