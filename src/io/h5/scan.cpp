// Bounded-memory scans over whole datasets.
#include "attnbatch/io/h5/scan.hpp"

#include "attnbatch/io/h5/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

namespace attnbatch::io {

Dims unravel_index(std::uint64_t flat, const Dims& dims) {
    Dims index(dims.size(), 0);
    for (std::size_t axis = dims.size(); axis-- > 0;) {
        if (dims[axis] == 0) continue;
        index[axis] = flat % dims[axis];
        flat /= dims[axis];
    }
    return index;
}

void scan_blocks(const Dataset& dataset, std::size_t max_bytes, MemType type,
                 const std::function<bool(const Slab& block, const void* data, std::size_t count)>& visit,
                 std::uint64_t first, std::uint64_t last) {
    const Dims full = dataset.dims();
    // The scan covers rows [first, last) of the first axis; offsets stay those of the dataset.
    Dims dims = full;
    if (!dims.empty()) dims[0] = std::min<std::uint64_t>(full[0], std::min<std::uint64_t>(last, full[0]));
    const std::uint64_t begin0 = dims.empty() ? 0 : std::min<std::uint64_t>(first, dims[0]);
    const std::size_t element = mem_type_size(type);
    // Blocks of at most 4 MiB whatever the budget: a block the size of the budget (64 MiB by
    // default) was a fresh allocation per call, zero-filled and faulted in page by page, then
    // read back from memory by the check: 1.24 s of value scan for a 262 MB float64 input,
    // against 0.22 s of compute. A small block is read and checked while it is in the cache.
    constexpr std::size_t kBlockBytes = std::size_t{4} << 20;
    const std::size_t budget = std::max(std::min(max_bytes, kBlockBytes), element);
    if (dims.empty()) {
        std::vector<unsigned char> buffer(element);
        read_slab(dataset, Slab{}, type, buffer.data(), 1);
        visit(Slab{}, buffer.data(), 1);
        return;
    }
    if (std::find(dims.begin(), dims.end(), std::uint64_t{0}) != dims.end() || begin0 >= dims[0]) return;

    // The outermost axis whose trailing box (that axis's single index times every inner
    // axis) fits the budget: blocks span several indices along it and all inner axes whole.
    // Grown from the innermost axis and compared by division, so a declared shape of more
    // than 2^64 bytes cannot wrap the arithmetic into a small buffer.
    const std::size_t rank = dims.size();
    const std::size_t limit = budget / element;  // elements per block, >= 1
    std::size_t axis = rank - 1;
    std::size_t inner = 1;
    while (axis > 0 && dims[axis] <= limit / inner) {
        inner *= static_cast<std::size_t>(dims[axis]);
        --axis;
    }
    const std::uint64_t step = std::min<std::uint64_t>(dims[axis], std::max<std::size_t>(1, limit / inner));
    const std::unique_ptr<unsigned char[]> buffer(new unsigned char[static_cast<std::size_t>(step) * inner * element]);

    Slab block{Dims(rank, 0), dims};
    for (std::size_t outer = 0; outer < axis; ++outer) block.count[outer] = 1;
    block.offset[0] = begin0;
    while (true) {
        for (std::uint64_t start = axis == 0 ? begin0 : 0; start < dims[axis]; start += step) {
            block.offset[axis] = start;
            block.count[axis] = std::min(step, dims[axis] - start);
            const std::size_t count = static_cast<std::size_t>(block.count[axis]) * inner;
            read_slab(dataset, block, type, buffer.get(), count);
            if (!visit(block, buffer.get(), count)) return;
        }
        // Advance the odometer over the axes outside the block.
        std::size_t outer = axis;
        while (outer > 0) {
            --outer;
            if (++block.offset[outer] < dims[outer]) break;
            block.offset[outer] = outer == 0 ? begin0 : 0;
            if (outer == 0) return;
        }
        if (axis == 0) return;
    }
}

bool all_within(const float* values, std::size_t count, double bound) {
    unsigned outside = 0;
    if (bound >= static_cast<double>(std::numeric_limits<float>::max())) {  // finite floats all qualify
        for (std::size_t i = 0; i < count; ++i) {
            std::uint32_t bits;
            std::memcpy(&bits, values + i, sizeof bits);
            outside |= static_cast<unsigned>((bits & 0x7f800000u) == 0x7f800000u);  // exponent all ones
        }
    } else {
        for (std::size_t i = 0; i < count; ++i) outside |= static_cast<unsigned>(!(std::fabs(static_cast<double>(values[i])) <= bound));
    }
    return outside == 0;
}

bool all_within(const double* values, std::size_t count, double bound) {
    bound = std::min(bound, std::numeric_limits<double>::max());  // so that infinities fail too
    unsigned outside = 0;
    for (std::size_t i = 0; i < count; ++i) outside |= static_cast<unsigned>(!(std::fabs(values[i]) <= bound));
    return outside == 0;
}

std::optional<BadValue> find_first_non_finite(const Dataset& dataset, std::size_t max_bytes, double max_magnitude,
                                              std::uint64_t first, std::uint64_t last) {
    std::optional<BadValue> found;
    // float16 and bfloat16 as their bits (HDF5 converts them at about 20 MB/s), widened here;
    // float32 as float32 (HDF5's conversion to double took half the scan's time); the rest as
    // double. Every float32 is a double, so the values and the culprit are the same.
    const TypeInfo info = dataset.type_info();
    const std::optional<MemType> bits = info.half_width_bits();
    const MemType read_as = bits ? *bits : (info.is_binary32() ? MemType::f32 : MemType::f64);
    std::vector<double> wide;
    std::vector<float> narrow_values;
    scan_blocks(dataset, max_bytes, read_as, [&](const Slab& block, const void* data, std::size_t count) {
        const double* values = static_cast<const double*>(data);
        if (read_as != MemType::f64) {
            const float* floats = static_cast<const float*>(data);
            if (bits) {
                narrow_values.resize(count);
                widen_half_width(*bits, static_cast<const std::uint16_t*>(data), narrow_values.data(), count);
                floats = narrow_values.data();
            }
            if (all_within(floats, count, max_magnitude)) return true;
            wide.assign(floats, floats + count);
            values = wide.data();
        } else if (all_within(values, count, max_magnitude)) {
            return true;
        }
        for (std::size_t i = 0; i < count; ++i) {
            if (std::isfinite(values[i]) && std::fabs(values[i]) <= max_magnitude) continue;
            // Blocks are boxes: offset the block's own multi-index by its corner.
            Dims index = unravel_index(i, block.count);
            for (std::size_t axis = 0; axis < index.size(); ++axis) index[axis] += block.offset[axis];
            found = BadValue{std::move(index), values[i]};
            return false;
        }
        return true;
    }, first, last);
    return found;
}

}  // namespace attnbatch::io
