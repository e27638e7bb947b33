#include "attnbatch/io/h5/mpi_io.hpp"

#include <cstdint>

#include "attnbatch/io/h5/handle.hpp"
#include "h5/access_setup.hpp"
#include "h5/check.hpp"
#include "h5/transfer_list.hpp"

namespace attnbatch::io {

bool hdf5_is_parallel() noexcept {
#if defined(H5_HAVE_PARALLEL)
    return true;
#else
    return false;
#endif
}

FileAccess mpi_io_access(MPI_Comm comm) {
#if defined(H5_HAVE_PARALLEL)
    auto setup = std::make_shared<detail::AccessSetup>();
    setup->configure = [comm](hid_t fapl) {
        H5_CALL(H5Pset_fapl_mpio, (Where{"(MPI-IO file access)", "/"}), fapl, comm, MPI_INFO_NULL);
    };
    return FileAccess(std::move(setup));
#else
    (void)comm;
    throw Error(exit_usage, "--io parallel: this HDF5 library was built without MPI-IO; hint: --io gather, or "
                            "build against a parallel HDF5 (Debian: libhdf5-openmpi-dev)");
#endif
}

#if defined(H5_HAVE_PARALLEL)
namespace {

std::string no_collective_causes(std::uint32_t cause) {
    struct Named {
        std::uint32_t bit;
        const char* text;
    };
    static const Named names[] = {
        {H5D_MPIO_SET_INDEPENDENT, "independent transfer requested"},
        {H5D_MPIO_DATATYPE_CONVERSION, "datatype conversion"},
        {H5D_MPIO_DATA_TRANSFORMS, "data transforms"},
        {H5D_MPIO_MPI_OPT_TYPES_ENV_VAR_DISABLED, "MPI derived types disabled"},
        {H5D_MPIO_NOT_SIMPLE_OR_SCALAR_DATASPACES, "dataspace not simple"},
        {H5D_MPIO_NOT_CONTIGUOUS_OR_CHUNKED_DATASET, "dataset layout"},
    };
    std::string text;
    for (const Named& n : names) {
        if (cause & n.bit) text += (text.empty() ? "" : ", ") + std::string(n.text);
    }
    return text.empty() ? "cause " + std::to_string(cause) : text;
}

const Where kTransfer{"(collective transfer)", "/"};

hid_t collective_list() {
    // One list for the process, made once: every collective transfer goes through it, so it
    // holds the cause of the last one's fallback.
    static const hid_t list = [] {
        PropertyListHandle created(H5_CALL(H5Pcreate, kTransfer, H5P_DATASET_XFER));
        H5_CALL(H5Pset_dxpl_mpio, kTransfer, created.id(), H5FD_MPIO_COLLECTIVE);
        return created.release();
    }();
    return list;
}

}  // namespace

hid_t detail::transfer_list(Transfer transfer) {
    return transfer == Transfer::collective ? collective_list() : H5P_DEFAULT;
}

std::string collective_fallback_cause() {
    std::uint32_t local = 0, global = 0;
    // A query, not an operation: a library that cannot answer has nothing to report.
    if (H5Pget_mpio_no_collective_cause(collective_list(), &local, &global) < 0) return {};
    return global != 0 ? no_collective_causes(global) : std::string();
}
#else
hid_t detail::transfer_list(Transfer transfer) {
    if (transfer == Transfer::independent) return H5P_DEFAULT;
    throw Error(exit_usage, "--io parallel: this HDF5 library was built without MPI-IO; hint: --io gather");
}

std::string collective_fallback_cause() { return {}; }
#endif

}  // namespace attnbatch::io
