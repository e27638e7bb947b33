#include "attnbatch/distributed/job_identity.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <sstream>

#include "attnbatch/io/h5/file_paths.hpp"
#include "attnbatch/io/models/weights_hash.hpp"
#include "attnbatch/io/output/attention_fields.hpp"
#include "attnbatch/io/output/journal.hpp"

namespace attnbatch::distributed {
namespace {

void describe_file(std::ostringstream& out, const std::string& key, const std::string& path) {
    out << key << " = " << io::real_path(path) << '\n';
    struct stat status {};
    if (::stat(path.c_str(), &status) == 0) {
        out << key << ".bytes = " << status.st_size << '\n'
            << key << ".modified = " << status.st_mtim.tv_sec << '.' << status.st_mtim.tv_nsec << '\n';
    }
}

template <class T>
std::string hash_of(const std::vector<T>& values) {
    return io::hash_hex(values.data(), values.size() * sizeof(T));
}

std::string exact(double value) {
    char text[40];
    std::snprintf(text, sizeof text, "%a", value);  // every bit, unlike a decimal rounding
    return text;
}

// The attention settings' lines, as io/output/attention_fields.hpp names them.
struct AttentionLines {
    std::ostringstream& out;
    template <class Field>
    void operator()(const io::AttentionField& field, const Field& value, const Field& default_value) const {
        if (field.identity_at_default || !(value == default_value)) out << field.identity << " = " << text(value) << '\n';
    }
    static std::string text(bool value) { return value ? "true" : "false"; }
    static std::string text(double value) { return exact(value); }
    static std::string text(kernels::Precision value) { return kernels::precision_name(value); }
};

}  // namespace

std::string job_identity(const io::InputSpec& spec, const std::optional<io::ProjectionWeights>& weights,
                            const std::vector<std::int32_t>& lengths, const AttentionSettings& settings,
                            const io::OutputLayout& layout) {
    std::ostringstream out;
    out << "journal format = 1\n";
    describe_file(out, "input", spec.path);
    // .npy shards: each by name, size and modification time, so that touching or replacing
    // one makes a partial output of the old shards refuse to resume. (Only then: an HDF5
    // input's identity is as it was.)
    for (std::size_t i = 0; i < spec.shards.size(); ++i) describe_file(out, "input shard " + std::to_string(i), spec.shards[i].path);
    if (spec.npy() && !spec.lengths.empty()) describe_file(out, "input lengths file", spec.lengths);
    if (spec.npy() && !spec.offsets.empty()) describe_file(out, "input offsets file", spec.offsets);
    out << "input datasets = "
        << (spec.mode == io::InputMode::embeddings ? spec.dataset : spec.query + "," + spec.key + "," + spec.value)
        << (spec.mode == io::InputMode::qkv ? spec.layout == io::QkvLayout::split ? " [N,H,L,d]" : " [N,L,H*d]" : "")
        << '\n'
        << "input lengths dataset = " << (spec.lengths.empty() ? "(none)" : spec.lengths) << '\n'
        << "input dtype = " << io::name_of(spec.dtype) << '\n'
        << "shape N L d H d_k d_v = " << spec.n << ' ' << spec.len << ' ' << spec.d << ' ' << spec.heads << ' '
        << spec.d_k << ' ' << spec.d_v << '\n'
        << "lengths xxh3 = " << hash_of(lengths) << '\n';
    if (spec.kv_head_count() != spec.heads) out << "kv heads = " << spec.kv_head_count() << '\n';
    // Only for the packed layout, so that a padded run's identity (and its journal) is as before.
    if (spec.packed) out << "layout = packed, offsets " << spec.offsets << ", T = " << spec.tokens << '\n';
    if (spec.weights) {
        describe_file(out, "weights", spec.weights->path);
        if (weights) out << "weights xxh3 = " << io::weights_hash(*weights) << '\n';
    } else {
        out << "weights = (none)\n";
    }
    io::for_each_attention_field(settings.spec, AttentionLines{out});
    out << "kernel = " << (settings.kernel.kind == kernels::KernelKind::reference ? "reference" : "blocked") << '\n'
        << "isa = " << kernels::isa_name(kernels::resolve_isa(settings.kernel.isa, settings.kernel.precision)) << '\n'
        // AMX and AVX512-BF16 may round differently inside a pair of products; absent for fp32,
        // as before bf16 existed, so that fp32 partial files stay resumable
        << (settings.kernel.precision == kernels::Precision::fp32
                ? std::string()
                : "matrix unit = " + kernels::matrix_unit(settings.kernel) + "\nbf16 kernel version = " +
                      std::to_string(kernels::kBf16BitsVersion) + '\n')
        << "block-q = " << settings.kernel.block_q << '\n'
        << "block-k = " << settings.kernel.block_k << '\n'
        << "save-weights = " << io::name_of(layout.save_weights) << '\n'
        << "weights-dtype = " << io::name_of(layout.weights_dtype) << '\n'
        << "weights-seqs = " << layout.first_sequence + layout.weights_first << ':' << layout.first_sequence + layout.weights_end() << '\n'
        << "compression = " << (layout.gzip_level ? "gzip:" + std::to_string(layout.gzip_level) : std::string("none"))
        << '\n';
    return out.str();
}

}  // namespace attnbatch::distributed
