// The safetensors format (github.com/huggingface/safetensors, "Format"): checked as the
// reference implementation checks it, so that a file it refuses is refused here too.
#include "attnbatch/io/models/safetensors.hpp"

#include "attnbatch/error.hpp"
#include "attnbatch/io/h5/scan.hpp"
#include "attnbatch/kernels/half.hpp"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

namespace attnbatch::io {
namespace {

// The reference implementation's own bound: a header above 100 MB is refused.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void invalid(const std::string& path, const std::string& what) {
    throw Error(exit_invalid_input, path + ": " + what);
}

std::uint64_t element_bytes(const std::string& dtype) {
    if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
    if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
    if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
    if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
    return 0;
}

// The dtypes read_floats converts; the format has more (F8_E4M3, BOOL, integers), which a model
// may hold in tensors that are not the layer's.
constexpr const char* kWeightDtypes = "F32, F16, BF16 or F64";

bool weight_dtype(const std::string& dtype) { return dtype == "F32" || dtype == "F16" || dtype == "BF16" || dtype == "F64"; }

std::string number_text(double value) {
    std::ostringstream out;
    out << value;
    return out.str();
}

// run computes in float32 and refuses weights files with NaN, inf or values beyond FLT_MAX;
// the import refuses them at the source, naming the tensor and the first bad element.
[[noreturn]] void refuse_value(const std::string& path, const SafetensorsTensor& tensor, std::size_t flat, double value) {
    Dims dims;
    for (const std::int64_t extent : tensor.shape) dims.push_back(static_cast<std::uint64_t>(extent));
    const std::string at = "tensor " + tensor.name + " (" + tensor.dtype + ") has ";
    const std::string where = " at " + shape_text(unravel_index(flat, dims));
    if (!std::isfinite(value)) {
        invalid(path, at + "a non-finite value (" + number_text(value) + ")" + where +
                          ", expected finite weights; hint: replace them, e.g. torch.nan_to_num, or check the model");
    }
    invalid(path, at + "the value " + number_text(value) + where +
                      ", beyond float32's range (|x| <= 3.4e38), expected weights that float32 holds");
}

bool within_float(double value) { return std::fabs(value) <= static_cast<double>(FLT_MAX); }  // false for NaN

void expect_finite(const std::string& path, const SafetensorsTensor& tensor, const std::vector<float>& values) {
    if (all_within(values.data(), values.size(), static_cast<double>(FLT_MAX))) return;
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (!within_float(static_cast<double>(values[i]))) refuse_value(path, tensor, i, static_cast<double>(values[i]));
    }
}

float bfloat16_to_float(std::uint16_t bits) {
    const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;  // bfloat16 is float32's top half
    float value = 0;
    std::memcpy(&value, &wide, sizeof value);
    return value;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
    struct stat status {};
    if (::stat(path.c_str(), &status) != 0) {
        throw Error(exit_io, path + ": cannot open: " + std::strerror(errno) + "; hint: check the path given to --input");
    }
    if (!S_ISREG(status.st_mode)) throw Error(exit_io, path + ": not a regular file; hint: --input takes a .safetensors file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(exit_io, path + ": cannot read: " + std::strerror(errno));
    const auto size = static_cast<std::uint64_t>(status.st_size);
    const std::string expected = "expected a safetensors file (8-byte header size, JSON header, tensor data)";
    unsigned char prefix[8] = {};
    if (size < 8 || !in.read(reinterpret_cast<char*>(prefix), 8)) {
        invalid(path, "not a safetensors file: " + std::to_string(size) + " bytes, too short for the header size; " + expected);
    }
    std::uint64_t header_bytes = 0;
    for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | prefix[i];
    if (header_bytes > kMaxHeaderBytes) {
        invalid(path, "not a safetensors file: its first 8 bytes give a header of " + std::to_string(header_bytes) +
                          " bytes, more than the format's 100 MB; " + expected);
    }
    if (header_bytes > size - 8) {
        invalid(path, "truncated safetensors file: the header needs " + std::to_string(header_bytes) + " bytes but only " +
                          std::to_string(size - 8) + " follow; hint: a partial download? fetch it again");
    }
    std::string header(header_bytes, '\0');
    if (!in.read(header.data(), static_cast<std::streamsize>(header_bytes))) {
        throw Error(exit_io, path + ": cannot read its header: " + std::strerror(errno));
    }
    data_start_ = 8 + header_bytes;
    const std::uint64_t data_bytes = size - data_start_;

    nlohmann::json json;
    try {
        json = nlohmann::json::parse(header);
    } catch (const nlohmann::json::parse_error& error) {
        invalid(path, "not a safetensors file: its header is not JSON (" + std::string(error.what()) + "); " + expected);
    }
    if (!json.is_object()) invalid(path, "not a safetensors file: its header is JSON but not an object; " + expected);
    try {
        for (const auto& [name, entry] : json.items()) {
            if (name == "__metadata__") {
                if (!entry.is_object()) invalid(path, "header entry __metadata__ is not an object of strings");
                for (const auto& [key, value] : entry.items()) {
                    if (value.is_string()) metadata_[key] = value.get<std::string>();
                }
                continue;
            }
            const std::string where = "tensor " + name + ": ";
            if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets")) {
                invalid(path, where + "header entry lacks dtype, shape or data_offsets; " + expected);
            }
            SafetensorsTensor tensor;
            tensor.name = name;
            tensor.dtype = entry.at("dtype").get<std::string>();
            std::uint64_t elements = 1;
            for (const auto& extent : entry.at("shape")) {
                const auto value = extent.get<std::int64_t>();
                if (value < 0) invalid(path, where + "negative extent in its shape");
                tensor.shape.push_back(value);
                if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(value), &elements)) {
                    invalid(path, where + "its shape overflows 64 bits");
                }
            }
            const auto& offsets = entry.at("data_offsets");
            if (!offsets.is_array() || offsets.size() != 2) invalid(path, where + "data_offsets is not [begin, end]");
            tensor.begin = offsets[0].get<std::uint64_t>();
            tensor.end = offsets[1].get<std::uint64_t>();
            const std::uint64_t element = element_bytes(tensor.dtype);
            if (element == 0) {
                invalid(path, where + "unknown dtype " + tensor.dtype + ", expected a safetensors dtype (weights: " +
                                  kWeightDtypes + ")");
            }
            if (tensor.end < tensor.begin || tensor.end - tensor.begin != elements * element) {
                // A tensor relabelled to a dtype of another width fails here before read_floats
                // could name the dtype, so the message names it when weights cannot have it.
                const std::string dtype_note = weight_dtype(tensor.dtype) ? std::string()
                    : "dtype " + tensor.dtype + ", which import-weights does not read (expected " + kWeightDtypes + "), and ";
                invalid(path, where + dtype_note + "data_offsets [" + std::to_string(tensor.begin) + ", " +
                                  std::to_string(tensor.end) + ") do not hold its shape of " + tensor.dtype + " (" +
                                  std::to_string(elements * element) + " bytes)");
            }
            if (tensor.end > data_bytes) {
                invalid(path, "truncated safetensors file: tensor " + name + " ends at byte " + std::to_string(tensor.end) +
                                  " of the data, which has only " + std::to_string(data_bytes) +
                                  "; hint: a partial download? fetch it again");
            }
            tensors_.push_back(std::move(tensor));
        }
    } catch (const nlohmann::json::exception& error) {
        invalid(path, "not a safetensors file: unexpected header content (" + std::string(error.what()) + "); " + expected);
    }
    std::sort(tensors_.begin(), tensors_.end(),
              [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.name < b.name; });
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
    const auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                                     [](const SafetensorsTensor& t, const std::string& n) { return t.name < n; });
    return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

std::vector<float> SafetensorsFile::read_floats(const SafetensorsTensor& tensor) const {
    const std::uint64_t bytes = tensor.end - tensor.begin;
    const std::uint64_t element = element_bytes(tensor.dtype);
    if (!weight_dtype(tensor.dtype)) {
        invalid(path_, "tensor " + tensor.name + " has dtype " + tensor.dtype + ", expected " + kWeightDtypes + " weights");
    }
    std::ifstream in(path_, std::ios::binary);
    std::vector<unsigned char> raw(bytes);
    in.seekg(static_cast<std::streamoff>(data_start_ + tensor.begin));
    if (!in || !in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(bytes))) {
        throw Error(exit_io, path_ + ": cannot read tensor " + tensor.name + ": " + std::strerror(errno));
    }
    const std::size_t count = bytes / element;
    std::vector<float> values(count);
    // The format is little-endian, as is every machine this builds for (x86-64, aarch64).
    for (std::size_t i = 0; i < count; ++i) {
        const unsigned char* at = raw.data() + i * element;
        if (tensor.dtype == "F32") {
            std::memcpy(&values[i], at, 4);
        } else if (tensor.dtype == "F64") {
            double wide = 0;
            std::memcpy(&wide, at, 8);
            // Checked before narrowing: 1e300 would become inf and be reported as such.
            if (!within_float(wide)) refuse_value(path_, tensor, i, wide);
            values[i] = static_cast<float>(wide);
        } else {
            std::uint16_t bits = 0;
            std::memcpy(&bits, at, 2);
            values[i] = tensor.dtype == "F16" ? kernels::half_to_float(bits) : bfloat16_to_float(bits);
        }
    }
    expect_finite(path_, tensor, values);
    return values;
}

}  // namespace attnbatch::io
