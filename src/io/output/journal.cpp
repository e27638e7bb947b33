// Checksums of the output's units, and the identity lines a resumed run must match.
#include "attnbatch/io/output/journal.hpp"

#include "attnbatch/io/output/output_layout.hpp"
#include "output/xxh3.hpp"

#include <xxhash.h>

#include <cstdio>
#include <set>
#include <stdexcept>

namespace attnbatch::io {

std::int64_t JournalState::done_units() const {
    std::int64_t count = 0;
    for (std::int64_t d : done) count += d != 0;
    return count;
}

std::uint64_t unit_checksum(const OutputLayout& layout, std::int64_t first, std::int64_t last,
                            std::int64_t block_first, const OutputBlock& block) {
    if (first < block_first || last < first) throw std::invalid_argument("unit_checksum: unit outside its block");
    const auto size = [](std::int64_t v) { return static_cast<std::size_t>(v); };
    const std::size_t len = size(layout.len);
    const std::size_t skip = size(first - block_first), count = size(last - first);
    const std::size_t output_row = len * size(layout.d_out), lse_row = size(layout.heads) * len;
    detail::Xxh3 hash;
    hash.add(block.output + skip * output_row, count * output_row * sizeof(float));
    hash.add(block.lse + skip * lse_row, count * lse_row * sizeof(float));
    hash.add(block.lengths + skip, count * sizeof(std::int32_t));
    const auto [begin, end] = layout.weights_range(first, last);
    if (end > begin) {
        const std::int64_t block_weights_first = std::max(block_first, layout.weights_first);
        const std::size_t row = size(layout.weights_heads()) * len * len;
        const std::size_t offset = size(begin - block_weights_first) * row, elements = size(end - begin) * row;
        if (layout.weights_dtype == WeightsDtype::f16) {
            hash.add(block.attention_f16 + offset, elements * sizeof(std::uint16_t));
        } else {
            hash.add(block.attention_f32 + offset, elements * sizeof(float));
        }
    }
    return hash.digest();
}

std::string hash_hex(const void* data, std::size_t bytes) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(data, bytes)));
    return hex;
}

std::map<std::string, std::string> identity_fields(const std::string& identity) {
    std::map<std::string, std::string> fields;
    std::size_t begin = 0;
    while (begin < identity.size()) {
        std::size_t end = identity.find('\n', begin);
        if (end == std::string::npos) end = identity.size();
        const std::string line = identity.substr(begin, end - begin);
        const std::size_t eq = line.find(" = ");
        if (eq != std::string::npos) fields[line.substr(0, eq)] = line.substr(eq + 3);
        begin = end + 1;
    }
    return fields;
}

std::string identity_differences(const std::string& recorded, const std::string& current) {
    const auto was = identity_fields(recorded), now = identity_fields(current);
    std::set<std::string> keys;
    for (const auto& [key, value] : was) keys.insert(key);
    for (const auto& [key, value] : now) keys.insert(key);
    std::string differences;
    for (const std::string& key : keys) {
        const auto a = was.find(key), b = now.find(key);
        const std::string before = a == was.end() ? "(none)" : a->second;
        const std::string after = b == now.end() ? "(none)" : b->second;
        if (before == after) continue;
        if (!differences.empty()) differences += "; ";
        differences += key + ": recorded " + before + ", now " + after;
    }
    return differences;
}

}  // namespace attnbatch::io
