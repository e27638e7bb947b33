// Dimension labels and dimension scales through the high-level dimension-scales API, the
// conventions h5py (labels) and netCDF readers (scales) understand.
#include "attnbatch/io/h5/dataset.hpp"

#include "h5/check.hpp"

#include <H5DSpublic.h>

#include <cstdio>
#include <stdexcept>

namespace attnbatch::io {

void set_dimension_labels(const Dataset& dataset, const std::vector<std::string>& labels) {
    const Where& where = dataset.where();
    if (labels.size() != dataset.dims().size()) {
        throw std::invalid_argument(where.file + ":" + where.object + ": " + std::to_string(labels.size()) +
                                    " labels for rank " + std::to_string(dataset.dims().size()));
    }
    for (std::size_t axis = 0; axis < labels.size(); ++axis) {
        H5_CALL(H5DSset_label, where, dataset.id(), static_cast<unsigned>(axis), labels[axis].c_str());
    }
}

std::vector<std::string> dimension_labels(const Dataset& dataset) {
    const Where& where = dataset.where();
    std::vector<std::string> labels;
    const std::size_t rank = dataset.dims().size();
    for (std::size_t axis = 0; axis < rank; ++axis) {
        // H5DSget_label returns the length (0 when unlabelled), or -1 on failure.
        const ssize_t length = H5DSget_label(dataset.id(), static_cast<unsigned>(axis), nullptr, 0);
        if (length < 0) detail::throw_h5_error("H5DSget_label", where);
        std::string label(static_cast<std::size_t>(length) + 1, '\0');
        if (length > 0) {
            H5_CALL(H5DSget_label, where, dataset.id(), static_cast<unsigned>(axis), label.data(), label.size());
        }
        label.resize(static_cast<std::size_t>(length));
        labels.push_back(std::move(label));
    }
    return labels;
}

Dataset create_dimension_scale(const File& file, const std::string& name, std::uint64_t length) {
    // Never written: serially it takes no space; parallel HDF5 allocates it at creation.
    Dataset scale = Dataset::create(file, name, Datatype::float32(), {length});
    // netCDF-C's own marker for a dimension without coordinate values, which h5netcdf and
    // netCDF4 read as "a dimension, not a variable".
    char marker[96];
    std::snprintf(marker, sizeof marker, "This is a netCDF dimension but not a netCDF variable.%10llu",
                  static_cast<unsigned long long>(length));
    H5_CALL(H5DSset_scale, scale.where(), scale.id(), marker);
    return scale;
}

void attach_dimension_scale(const Dataset& dataset, const Dataset& scale, unsigned axis) {
    H5_CALL(H5DSattach_scale, dataset.where(), dataset.id(), scale.id(), axis);
}

std::vector<std::string> dimension_scale_names(const Dataset& dataset) {
    const Where& where = dataset.where();
    std::vector<std::string> names;
    const std::size_t rank = dataset.dims().size();
    for (std::size_t axis = 0; axis < rank; ++axis) {
        std::string name;
        const int count = H5DSget_num_scales(dataset.id(), static_cast<unsigned>(axis));
        if (count > 0) {
            const auto visit = [](hid_t, unsigned, hid_t scale, void* data) -> herr_t {
                char path[256] = {};
                if (H5Iget_name(scale, path, sizeof path) < 0) return -1;
                std::string text = path;
                *static_cast<std::string*>(data) = text.substr(text.rfind('/') + 1);
                return 1;  // the first scale is enough
            };
            int index = 0;
            H5_CALL(H5DSiterate_scales, where, dataset.id(), static_cast<unsigned>(axis), &index, visit, &name);
        }
        names.push_back(std::move(name));
    }
    return names;
}

}  // namespace attnbatch::io
