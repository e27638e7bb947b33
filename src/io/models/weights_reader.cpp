// Reading the projection weights whole, as float32.
#include "attnbatch/io/models/weights_reader.hpp"

#include "attnbatch/io/h5/dataset.hpp"
#include "attnbatch/io/h5/error.hpp"
#include "attnbatch/io/h5/file.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "h5/open_checked.hpp"

namespace attnbatch::io {

ProjectionWeights read_weights(const WeightsSpec& spec, const FileAccess& access) {
    const File file = detail::open_input_file(spec.path, "--weights", access);
    ProjectionWeights weights;
    try {
        const auto load = [&](const char* path, bool present, std::vector<float>& out) {
            if (present) out = read_all<float>(Dataset::open(file, path));
        };
        load(dataset::w_q, true, weights.w_q);
        load(dataset::w_k, true, weights.w_k);
        load(dataset::w_v, true, weights.w_v);
        load(dataset::w_o, spec.has_w_o, weights.w_o);
        load(dataset::b_q, spec.has_b_q, weights.b_q);
        load(dataset::b_k, spec.has_b_k, weights.b_k);
        load(dataset::b_v, spec.has_b_v, weights.b_v);
        load(dataset::b_o, spec.has_b_o, weights.b_o);
    } catch (const H5Error& error) {
        detail::rethrow_read_failure(error);
    }
    return weights;
}

}  // namespace attnbatch::io
