#include "attnbatch/io/models/weights_hash.hpp"

#include "attnbatch/io/output/journal.hpp"

namespace attnbatch::io {

std::string weights_hash(const ProjectionWeights& weights) {
    // Changing how this is computed makes every recorded identity disagree: partial outputs
    // stop resuming and `weights` refuses the weights of finished ones.
    std::string all;
    for (const std::vector<float>* w : {&weights.w_q, &weights.w_k, &weights.w_v, &weights.w_o, &weights.b_q, &weights.b_k,
                                        &weights.b_v, &weights.b_o}) {
        all += hash_hex(w->data(), w->size() * sizeof(float));
    }
    return hash_text(all);
}

}  // namespace attnbatch::io
