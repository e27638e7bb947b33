// .npy shards as one input: which files, what they hold, and reading them in place.
#include "attnbatch/io/input/npy_shards.hpp"

#include "attnbatch/io/h5/schema_names.hpp"
#include "attnbatch/io/h5/scan.hpp"
#include "attnbatch/io/input/npy_file.hpp"
#include "h5/dataset_rules.hpp"
#include "input/mapped_floats.hpp"
#include "input/read_buffer.hpp"

#include <glob.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace attnbatch::io {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void invalid(const std::string& message) { throw Error(exit_invalid_input, message); }
[[noreturn]] void usage(const std::string& message) { throw Error(exit_usage, message); }

const char* const lengths_sidecar = "lengths.npy";
const char* const offsets_sidecar = "offsets.npy";

bool ends_with(const std::string& text, const std::string& suffix) {
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool has_glob_characters(const std::string& path) { return path.find_first_of("*?[") != std::string::npos; }

bool is_list_file(const std::string& path) { return ends_with(path, ".txt") || ends_with(path, ".list"); }

// Digit runs compare as numbers: shard_2 before shard_10, as people number their shards.
bool natural_less(const std::string& a, const std::string& b) {
    std::size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        const bool da = a[i] >= '0' && a[i] <= '9', db = b[j] >= '0' && b[j] <= '9';
        if (da && db) {
            std::size_t ei = i, ej = j;
            while (ei < a.size() && a[ei] >= '0' && a[ei] <= '9') ++ei;
            while (ej < b.size() && b[ej] >= '0' && b[ej] <= '9') ++ej;
            std::size_t si = i, sj = j;  // leading zeros do not count
            while (si + 1 < ei && a[si] == '0') ++si;
            while (sj + 1 < ej && b[sj] == '0') ++sj;
            if (ei - si != ej - sj) return ei - si < ej - sj;
            const int order = a.compare(si, ei - si, b, sj, ej - sj);
            if (order != 0) return order < 0;
            if (ei - i != ej - j) return ei - i < ej - j;
            i = ei;
            j = ej;
            continue;
        }
        if (a[i] != b[j]) return a[i] < b[j];
        ++i;
        ++j;
    }
    return a.size() - i < b.size() - j;
}

std::string absolute_of(const std::string& path) {
    std::error_code error;
    const fs::path absolute = fs::absolute(path, error);
    return error ? path : absolute.lexically_normal().string();
}

// The shards --input names, in order, without the sidecars.
std::vector<std::string> resolve_shards(const std::string& input, const std::string& lengths_given) {
    const std::string given_lengths = lengths_given.empty() ? std::string() : absolute_of(lengths_given);
    const auto sidecar = [&](const std::string& path) {
        const std::string name = fs::path(path).filename().string();
        return name == lengths_sidecar || name == offsets_sidecar || (!given_lengths.empty() && absolute_of(path) == given_lengths);
    };
    std::vector<std::string> shards;
    std::error_code error;
    if (fs::is_directory(input, error)) {
        for (const fs::directory_entry& entry : fs::directory_iterator(input, error)) {
            const std::string path = entry.path().string();
            if (ends_with(path, ".npy") && !sidecar(path)) shards.push_back(path);
        }
        if (error) throw Error(exit_io, "--input " + input + ": cannot list the directory: " + error.message());
        if (shards.empty()) {
            throw Error(exit_io, "--input " + input + " is a directory with no .npy shards; expected an HDF5 file, .npy "
                                 "shards (a glob, a directory of them, or a list file)");
        }
        std::sort(shards.begin(), shards.end(), natural_less);
        return shards;
    }
    if (has_glob_characters(input) && !fs::exists(input, error)) {
        glob_t found{};
        const int status = ::glob(input.c_str(), GLOB_NOSORT, nullptr, &found);
        if (status == 0) {
            for (std::size_t i = 0; i < found.gl_pathc; ++i) {
                if (!sidecar(found.gl_pathv[i])) shards.emplace_back(found.gl_pathv[i]);
            }
        }
        ::globfree(&found);
        if (status != 0 && status != GLOB_NOMATCH) throw Error(exit_io, "--input '" + input + "': cannot expand the pattern");
        if (shards.empty()) {
            throw Error(exit_io, "--input '" + input + "' matches no .npy shard" +
                                     (status == 0 ? " (only the sidecars lengths.npy/offsets.npy)" : "") +
                                     "; expected a pattern such as 'shards/*.npy'");
        }
        std::sort(shards.begin(), shards.end(), natural_less);
        return shards;
    }
    if (is_list_file(input)) {
        std::ifstream list(input);
        if (!list) throw Error(exit_io, "--input " + input + ": cannot open the list of shards");
        const fs::path base = fs::path(input).parent_path();
        std::set<std::string> seen;
        std::string line;
        for (int number = 1; std::getline(list, line); ++number) {
            const std::size_t begin = line.find_first_not_of(" \t\r");
            if (begin == std::string::npos || line[begin] == '#') continue;
            const std::size_t end = line.find_last_not_of(" \t\r");
            fs::path path = line.substr(begin, end - begin + 1);
            if (path.is_relative()) path = base / path;
            const std::string shard = path.lexically_normal().string();
            if (!seen.insert(absolute_of(shard)).second) {
                invalid("--input " + input + " line " + std::to_string(number) + " names " + shard +
                        " a second time; expected every shard once");
            }
            shards.push_back(shard);
        }
        if (list.bad()) throw Error(exit_io, "--input " + input + ": cannot read the list of shards");
        if (shards.empty()) invalid("--input " + input + " lists no shards; expected one .npy path per line");
        return shards;
    }
    return {input};
}

std::string shard_where(const NpyHeader& header) { return "shard " + header.path; }

// Every shard agrees with the first on rank, dtype and the extents after the first axis.
void check_shard(const NpyHeader& shard, const NpyHeader& first) {
    if (shard.kind != NpyKind::floating) {
        invalid(shard_where(shard) + " has dtype " + shard.dtype_name() + " ('" + shard.descr +
                "'), expected float32, float64 or float16");
    }
    if (shard.shape.size() != 2 && shard.shape.size() != 3) {
        invalid(shard_where(shard) + " has shape " + shard.shape_text() + " (rank " + std::to_string(shard.shape.size()) +
                "), expected [n, L, d] (padded) or [T, d] (packed, with offsets.npy or lengths)");
    }
    if (&shard == &first) return;
    if (shard.shape.size() != first.shape.size()) {
        invalid(shard_where(shard) + " has shape " + shard.shape_text() + " but " + first.path + " has " + first.shape_text() +
                "; expected every shard " + (first.shape.size() == 3 ? "[n_i, L, d] (padded)" : "[T_i, d] (packed)"));
    }
    if (shard.item_bytes != first.item_bytes) {
        invalid(shard_where(shard) + " has dtype " + shard.dtype_name() + ", expected " + first.dtype_name() + " like " +
                first.path + " (every shard one dtype)");
    }
    const std::size_t rank = first.shape.size();
    if (rank == 3 && shard.shape[1] != first.shape[1]) {
        invalid(shard_where(shard) + " has L = " + std::to_string(shard.shape[1]) + " (shape " + shard.shape_text() +
                "), expected L = " + std::to_string(first.shape[1]) + " like " + first.path);
    }
    if (shard.shape[rank - 1] != first.shape[rank - 1]) {
        invalid(shard_where(shard) + " has d = " + std::to_string(shard.shape[rank - 1]) + " (shape " + shard.shape_text() +
                "), expected d = " + std::to_string(first.shape[rank - 1]) + " like " + first.path);
    }
}

NpyHeader sidecar_header(const std::string& path, const std::string& role, const std::string& expected) {
    NpyHeader header = read_npy_header(path, role);
    if (header.kind == NpyKind::floating) {
        invalid(role + " " + path + " has dtype " + header.dtype_name() + ", expected an integer type (" + expected + ")");
    }
    if (header.shape.size() != 1) {
        invalid(role + " " + path + " has shape " + header.shape_text() + ", expected " + expected);
    }
    return header;
}

// The lengths sidecar: --lengths FILE.npy, lengths.npy beside the shards, or none.
std::string lengths_path(const InputOptions& options, const std::string& beside) {
    if (options.lengths == "none") return {};
    if (!options.lengths.empty()) {
        if (!ends_with(options.lengths, ".npy")) {
            usage("--lengths " + options.lengths + ": with .npy shards --lengths names a .npy file of integer [N] "
                  "(or none), not a dataset");
        }
        return options.lengths;
    }
    const fs::path path = fs::path(beside) / lengths_sidecar;
    std::error_code error;
    return fs::exists(path, error) ? path.string() : std::string();
}

void describe_heads(const InputOptions& options, InputSpec& spec) {
    if (options.heads < 0) usage("--heads " + std::to_string(options.heads) + " is negative; expected H >= 1");
    spec.heads = options.heads == 0 ? 1 : options.heads;
    if (!options.weights_path.empty()) return;
    detail::raise_if(detail::heads_divide_rule(spec.heads, spec.d, "d", spec.path));
    spec.d_k = spec.d_v = spec.d / spec.heads;
    if (options.kv_heads != 0 && options.kv_heads != spec.heads) {
        usage("--kv-heads " + std::to_string(options.kv_heads) + " needs separate keys and values, but without --weights "
              "Q = K = V = the embeddings, split into H = " + std::to_string(spec.heads) + " heads; hint: give --weights "
              "or drop --kv-heads");
    }
    spec.kv_heads = spec.heads;
}

void describe_padded_lengths(const std::string& path, InputSpec& spec) {
    const NpyHeader header = sidecar_header(path, "--lengths", "integer [N] = [" + std::to_string(spec.n) + "]");
    if (header.shape[0] != spec.n) {
        invalid("--lengths " + path + " has shape " + header.shape_text() + ", expected [N] = [" + std::to_string(spec.n) +
                "], one count per sequence of all shards");
    }
    const std::vector<std::int64_t> lengths = read_npy_integers(header);
    for (std::size_t i = 0; i < lengths.size(); ++i) {
        if (lengths[i] >= 0 && lengths[i] <= spec.len) continue;
        invalid("--lengths " + path + "[" + std::to_string(i) + "] = " + std::to_string(lengths[i]) +
                (lengths[i] < 0 ? " is negative" : " exceeds L = " + std::to_string(spec.len)) +
                " (expected 0 <= length <= L = " + std::to_string(spec.len) + ")");
    }
    spec.lengths = path;
}

void describe_packed_sequences(const std::string& lengths, const std::string& offsets, InputSpec& spec) {
    std::vector<std::int64_t> bounds;
    if (!offsets.empty()) {
        const NpyHeader header = sidecar_header(offsets, "offsets", "integer [N+1] rising from 0 to T");
        if (header.shape[0] < 2) {
            invalid("offsets " + offsets + " has shape " + header.shape_text() + ", expected [N+1] with N >= 1");
        }
        bounds = read_npy_integers(header);
        for (std::size_t i = 0; i < bounds.size(); ++i) {
            const std::string where = "offsets " + offsets + "[" + std::to_string(i) + "] = " + std::to_string(bounds[i]);
            if (i == 0 && bounds[0] != 0) invalid(where + ", expected 0 (the first sequence starts at row 0)");
            if (i > 0 && bounds[i] < bounds[i - 1]) {
                invalid(where + " is below offsets[" + std::to_string(i - 1) + "] = " + std::to_string(bounds[i - 1]) +
                        ", expected offsets that never decrease");
            }
        }
        if (bounds.back() != spec.tokens) {
            invalid("offsets " + offsets + "[" + std::to_string(bounds.size() - 1) + "] = " + std::to_string(bounds.back()) +
                    ", expected T = " + std::to_string(spec.tokens) + ", the rows of all shards (the last sequence ends "
                    "with the data)");
        }
        spec.offsets = offsets;
    }
    if (!lengths.empty()) {
        const NpyHeader header = sidecar_header(lengths, "--lengths", "integer [N]");
        const std::vector<std::int64_t> counts = read_npy_integers(header);
        if (!bounds.empty() && counts.size() + 1 != bounds.size()) {
            invalid("--lengths " + lengths + " has shape " + header.shape_text() + " but offsets " + offsets + " gives N = " +
                    std::to_string(bounds.size() - 1) + " sequences; expected [N]");
        }
        if (counts.empty()) invalid("--lengths " + lengths + " has shape [0], expected [N] with N >= 1");
        std::vector<std::int64_t> running{0};
        for (std::size_t i = 0; i < counts.size(); ++i) {
            if (counts[i] < 0) invalid("--lengths " + lengths + "[" + std::to_string(i) + "] = " + std::to_string(counts[i]) + " is negative");
            if (!bounds.empty() && counts[i] != bounds[i + 1] - bounds[i]) {
                invalid("--lengths " + lengths + "[" + std::to_string(i) + "] = " + std::to_string(counts[i]) + " but offsets " +
                        offsets + " gives sequence " + std::to_string(i) + " " + std::to_string(bounds[i + 1] - bounds[i]) +
                        " rows; expected equal; hint: drop one of the sidecars or correct it");
            }
            running.push_back(running.back() + std::min<std::int64_t>(counts[i], spec.tokens + 1));
        }
        if (bounds.empty() && running.back() != spec.tokens) {
            invalid("--lengths " + lengths + " sums to " + std::to_string(running.back()) + " tokens, expected T = " +
                    std::to_string(spec.tokens) + ", the rows of all shards (packed sequences end to end)");
        }
        if (bounds.empty()) bounds = std::move(running);
        if (offsets.empty()) spec.lengths = lengths;
    }
    if (bounds.empty()) {
        invalid("--input " + spec.path + ": packed shards [T_i, d] need their sequences: expected offsets.npy (integer "
                "[N+1] over the rows of all shards) or lengths.npy / --lengths FILE.npy (integer [N]) beside the shards");
    }
    spec.n = static_cast<std::int64_t>(bounds.size()) - 1;
    std::int64_t longest = 0;
    for (std::size_t i = 0; i + 1 < bounds.size(); ++i) {
        const std::int64_t length = bounds[i + 1] - bounds[i];
        if (length > INT_MAX) {
            invalid("--input " + spec.path + ": sequence " + std::to_string(i) + " has " + std::to_string(length) +
                    " tokens, expected at most " + std::to_string(INT_MAX));
        }
        longest = std::max(longest, length);
    }
    spec.len = std::max<std::int64_t>(longest, 1);
}

// Whether elements [begin, end) of a shard are finite and within float32's range, decided by
// one vectorised pass (all_within) over the stored type: element by element through
// npy_float_at the scan took 7.7 ns a float64 (0.25 s for a 262 MB shard, more than the run's
// compute). False also where it cannot say (big-endian, integer or misaligned data): the caller
// then reads element by element, as it does to name the first culprit.
bool in_float_range(const NpyHeader& header, const unsigned char* data, std::int64_t begin, std::int64_t end) {
    const unsigned char* at = data + static_cast<std::size_t>(begin) * header.item_bytes;
    if (header.big_endian || header.kind != NpyKind::floating || reinterpret_cast<std::uintptr_t>(at) % header.item_bytes != 0) {
        return false;
    }
    const std::size_t count = static_cast<std::size_t>(end - begin);
    if (header.item_bytes == 8) return all_within(reinterpret_cast<const double*>(at), count, FLT_MAX);
    if (header.item_bytes == 4) return all_within(reinterpret_cast<const float*>(at), count, FLT_MAX);
    if (header.item_bytes != 2) return false;
    unsigned outside = 0;  // float16: finite values are all within float32's range
    for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, at + 2 * i, sizeof bits);
        outside |= static_cast<unsigned>((bits & 0x7c00u) == 0x7c00u);
    }
    return outside == 0;
}

// The error for element i of a shard, `value`: not finite, or beyond float32's range.
[[noreturn]] void reject_value(const NpyHeader& header, std::int64_t i, double value) {
    std::vector<std::int64_t> at(header.shape.size());
    for (std::size_t axis = at.size(); axis-- > 0;) {
        at[axis] = i % header.shape[axis];
        i /= header.shape[axis];
    }
    std::string index = "[";
    for (std::size_t axis = 0; axis < at.size(); ++axis) index += (axis ? ", " : "") + std::to_string(at[axis]);
    index += "]";
    std::ostringstream text;
    text << value;
    if (!std::isfinite(value)) {
        invalid("shard " + header.path + " has a non-finite value (" + text.str() + ") at " + index +
                ", expected finite values everywhere, padding included; hint: replace them, e.g. numpy.nan_to_num");
    }
    invalid("shard " + header.path + " has the value " + text.str() + " at " + index +
            ", beyond float32's range (|x| <= 3.4e38) used for the compute; hint: rescale the data");
}

}  // namespace

bool is_npy_input(const std::string& input_path) {
    std::error_code error;
    if (fs::is_directory(input_path, error)) return true;
    if (ends_with(input_path, ".npy") || is_list_file(input_path)) return true;
    return has_glob_characters(input_path) && !fs::exists(input_path, error);
}

void describe_npy_input(const InputOptions& options, InputSpec& spec) {
    if (!options.query.empty()) {
        usage("--query/--key/--value name datasets of an HDF5 input, but --input " + options.input_path + " is .npy shards "
              "(one array of embeddings each); hint: run on the embeddings (with --weights for projections), or write "
              "Q, K and V into an HDF5 file");
    }
    if (!options.dataset.empty() && options.dataset != dataset::embeddings && options.dataset != "embeddings") {
        usage("--dataset " + options.dataset + " names a dataset of an HDF5 input, but --input " + options.input_path +
              " is .npy shards holding one array each; hint: drop --dataset");
    }
    spec.path = options.input_path;
    spec.mode = InputMode::embeddings;
    spec.dataset = "(.npy shards)";
    const std::vector<std::string> paths = resolve_shards(options.input_path, options.lengths == "none" ? "" : options.lengths);
    std::vector<NpyHeader> headers;
    headers.reserve(paths.size());
    for (const std::string& path : paths) {
        headers.push_back(read_npy_header(path, "shard"));
        check_shard(headers.back(), headers.front());
    }
    const NpyHeader& first = headers.front();
    spec.dtype = first.item_bytes == 8 ? DataType::float64 : first.item_bytes == 4 ? DataType::float32 : DataType::float16;
    std::int64_t rows = 0;
    for (const NpyHeader& header : headers) {
        spec.shards.push_back(NpyShard{header.path, header.shape[0], header.data_offset, header.big_endian});
        rows += header.shape[0];
    }
    const std::string beside = fs::path(first.path).parent_path().string();
    const std::string lengths = lengths_path(options, beside.empty() ? "." : beside);
    const bool packed = first.shape.size() == 2;
    spec.d = first.shape.back();
    if (spec.d == 0 || (!packed && first.shape[1] == 0)) {
        invalid(shard_where(first) + " has shape " + first.shape_text() + ", expected L >= 1 and d >= 1");
    }
    if (packed) {
        spec.packed = true;
        spec.tokens = rows;
        std::error_code error;
        const fs::path offsets = fs::path(beside.empty() ? "." : beside) / offsets_sidecar;
        describe_packed_sequences(lengths, fs::exists(offsets, error) ? offsets.string() : std::string(), spec);
    } else {
        spec.n = rows;
        spec.len = first.shape[1];
        if (spec.n == 0) invalid("--input " + spec.path + ": the shards hold no sequences (N = 0), expected N >= 1");
        if (!lengths.empty()) describe_padded_lengths(lengths, spec);
    }
    describe_heads(options, spec);
}

std::vector<std::int32_t> npy_stored_lengths(const InputSpec& spec) {
    std::vector<std::int32_t> lengths;
    if (spec.packed) {
        const std::vector<std::int64_t> offsets = npy_stored_offsets(spec);
        for (std::size_t i = 0; i + 1 < offsets.size(); ++i) lengths.push_back(static_cast<std::int32_t>(offsets[i + 1] - offsets[i]));
        return lengths;
    }
    std::int64_t stored = 0;
    for (const NpyShard& shard : spec.shards) stored += shard.rows;
    if (spec.lengths.empty()) return std::vector<std::int32_t>(static_cast<std::size_t>(stored), static_cast<std::int32_t>(spec.len));
    for (const std::int64_t value : read_npy_integers(read_npy_header(spec.lengths, "--lengths"))) {
        lengths.push_back(static_cast<std::int32_t>(value));
    }
    return lengths;
}

std::vector<std::int64_t> npy_stored_offsets(const InputSpec& spec) {
    if (!spec.offsets.empty()) return read_npy_integers(read_npy_header(spec.offsets, "offsets"));
    std::vector<std::int64_t> offsets{0};
    for (const std::int64_t value : read_npy_integers(read_npy_header(spec.lengths, "--lengths"))) {
        offsets.push_back(offsets.back() + value);
    }
    return offsets;
}

struct NpyShardSet::Mapped {
    NpyHeader header;
    MappedNpy file;
};

NpyShardSet::NpyShardSet(const InputSpec& spec) {
    const std::size_t item = spec.dtype == DataType::float64 ? 8 : spec.dtype == DataType::float32 ? 4 : 2;
    row_width_ = spec.packed ? spec.d : spec.len * spec.d;
    std::int64_t rows = 0;
    for (const NpyShard& shard : spec.shards) {
        NpyHeader header;
        header.path = shard.path;
        header.kind = NpyKind::floating;
        header.item_bytes = item;
        header.big_endian = shard.big_endian;
        header.shape = spec.packed ? std::vector<std::int64_t>{shard.rows, spec.d}
                                   : std::vector<std::int64_t>{shard.rows, spec.len, spec.d};
        header.data_offset = shard.data_offset;
        header.file_bytes = shard.data_offset + shard.rows * row_width_ * static_cast<std::int64_t>(item);
        MappedNpy file(header);
        shards_.push_back(Mapped{std::move(header), std::move(file)});
        first_row_.push_back(rows);
        rows += shard.rows;
    }
    first_row_.push_back(rows);
}

NpyShardSet::NpyShardSet(NpyShardSet&&) noexcept = default;
NpyShardSet& NpyShardSet::operator=(NpyShardSet&&) noexcept = default;
NpyShardSet::~NpyShardSet() = default;

std::size_t NpyShardSet::shard_of(std::int64_t row) const noexcept {
    const auto s = static_cast<std::size_t>(std::upper_bound(first_row_.begin(), first_row_.end() - 1, row) - first_row_.begin());
    return s == 0 ? 0 : s - 1;
}

void NpyShardSet::read_elements(std::int64_t first, std::int64_t count, float* out) const {
    std::size_t s = shard_of(first / row_width_);
    while (count > 0 && s < shards_.size()) {
        const std::int64_t shard_first = first_row_[s] * row_width_, shard_end = first_row_[s + 1] * row_width_;
        if (first >= shard_end) {
            ++s;
            continue;
        }
        const std::int64_t take = std::min(count, shard_end - first);
        const Mapped& shard = shards_[s];
        npy_floats_to_f32(shard.header, shard.file.data() + static_cast<std::size_t>(first - shard_first) * shard.header.item_bytes,
                          static_cast<std::size_t>(take), out);
        out += take;
        first += take;
        count -= take;
        ++s;
    }
    if (count > 0) throw std::invalid_argument("NpyShardSet::read_elements: beyond the last shard");
}

void NpyShardSet::read_rows(std::int64_t first, std::int64_t count, std::vector<float>& out) const {
    detail::size_for_read(out, static_cast<std::size_t>(count * row_width_));
    read_elements(first * row_width_, count * row_width_, out.data());
}

const float* NpyShardSet::rows_in_place(std::int64_t first, std::int64_t count) const noexcept {
    if (count <= 0 || shards_.empty()) return nullptr;
    const std::size_t s = shard_of(first);
    const NpyHeader& header = shards_[s].header;
    if (first < first_row_[s] || first + count > first_row_[s + 1] || header.kind != NpyKind::floating || header.item_bytes != 4 ||
        header.big_endian) {
        return nullptr;
    }
    const unsigned char* at = shards_[s].file.data() + static_cast<std::size_t>((first - first_row_[s]) * row_width_) * 4;
    return reinterpret_cast<std::uintptr_t>(at) % detail::kInPlaceBound == 0 ? reinterpret_cast<const float*>(at) : nullptr;
}

void NpyShardSet::expect_finite_rows(std::int64_t first, std::int64_t last) const {
    for (std::size_t s = 0; s < shards_.size(); ++s) {
        const std::int64_t begin = std::max(first, first_row_[s]), end = std::min(last, first_row_[s + 1]);
        if (begin >= end) continue;
        const Mapped& shard = shards_[s];
        const std::int64_t element_begin = (begin - first_row_[s]) * row_width_;
        const std::int64_t element_end = (end - first_row_[s]) * row_width_;
        constexpr std::int64_t kPiece = std::int64_t{1} << 16;  // elements decided at once
        for (std::int64_t piece = element_begin, piece_end = 0; piece < element_end; piece = piece_end) {
            piece_end = std::min(element_end, piece + kPiece);
            if (in_float_range(shard.header, shard.file.data(), piece, piece_end)) continue;
            for (std::int64_t i = piece; i < piece_end; ++i) {
                const double value = npy_float_at(shard.header, shard.file.data(), i);
                if (std::isfinite(value) && std::fabs(value) <= static_cast<double>(FLT_MAX)) continue;
                reject_value(shard.header, i, value);
            }
        }
    }
}

}  // namespace attnbatch::io
