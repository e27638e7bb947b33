// Dimension labels through the high-level dimension-scales API, the convention h5py and
// other readers already understand.
#include "attnbatch/io/h5_dataset.hpp"

#include "h5_check.hpp"

#include <H5DSpublic.h>

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

}  // namespace attnbatch::io
