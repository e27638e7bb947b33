// Reading safetensors files (the format of Hugging Face model weights): an 8-byte little-endian
// header size, a JSON header naming every tensor (dtype, shape, byte offsets in the data that
// follows) and an optional "__metadata__" map of strings, then the raw little-endian data.
// The header is parsed by nlohmann::json (Debian's nlohmann-json3-dev); tensors are read one
// at a time, so memory holds the header and the tensor asked for.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace attnbatch::io {

struct SafetensorsTensor {
    std::string name;
    std::string dtype;                // "F32", "F16", "BF16", "F64", "I64", ...
    std::vector<std::int64_t> shape;  // row-major; PyTorch weights are [out, in]
    std::uint64_t begin = 0, end = 0;  // byte offsets into the data section
};

class SafetensorsFile {
public:
    // Reads and checks the header: Error exit 4 when the file cannot be read, exit 3 (one line
    // naming what is wrong) when it is not a safetensors file, is truncated, or its header
    // names offsets or sizes that do not fit.
    explicit SafetensorsFile(const std::string& path);

    const std::string& path() const noexcept { return path_; }
    const std::vector<SafetensorsTensor>& tensors() const noexcept { return tensors_; }  // sorted by name
    const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
    const SafetensorsTensor* find(const std::string& name) const;  // null when absent

    // The tensor's values as float32, converted from F32, F16, BF16 or F64 (exactly, but for
    // F64 values rounded to nearest). Error exit 3 for another dtype, and for a NaN, an
    // infinity or an F64 value beyond float32's range (naming the first one's index).
    std::vector<float> read_floats(const SafetensorsTensor& tensor) const;

private:
    std::string path_;
    std::uint64_t data_start_ = 0;
    std::vector<SafetensorsTensor> tensors_;
    std::map<std::string, std::string> metadata_;
};

}  // namespace attnbatch::io
