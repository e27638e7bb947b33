// Box iteration and conversion for write_computed().
#include "slab_writer.hpp"

#include "attnbatch/io/chunking.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace attnbatch::cli {
namespace {

// Advances `index` over the box `count` in row-major order, the last `skip` axes excluded;
// false once every index has been visited.
bool next_index(io::Dims& index, const io::Dims& count, std::size_t skip) {
    for (std::size_t axis = count.size() - skip; axis-- > 0;) {
        if (++index[axis] < count[axis]) return true;
        index[axis] = 0;
    }
    return false;
}

template <class T>
void store(const std::vector<double>& run, std::size_t count, void* out) {
    T* target = static_cast<T*>(out);
    for (std::size_t i = 0; i < count; ++i) target[i] = static_cast<T>(run[i]);
}

}  // namespace

void write_computed(const io::Dataset& dataset, io::MemType type, std::size_t max_bytes, const RunFill& fill) {
    if (type != io::MemType::f32 && type != io::MemType::f64 && type != io::MemType::i32) {
        throw std::invalid_argument("write_computed: memory type must be f32, f64 or i32");
    }
    const io::Dims dims = dataset.dims();
    if (dims.empty() || io::element_count(dims) == 0) return;
    const std::size_t element_size = io::mem_type_size(type);
    const io::Dims box = io::chunk_shape(dims, element_size, max_bytes);
    const std::size_t rank = dims.size();
    io::Dims grid(rank);
    for (std::size_t axis = 0; axis < rank; ++axis) grid[axis] = (dims[axis] + box[axis] - 1) / box[axis];

    std::vector<unsigned char> buffer(io::element_count(box) * element_size);
    std::vector<double> run(static_cast<std::size_t>(box[rank - 1]));
    io::Dims cell(rank, 0);
    do {
        io::Slab slab{io::Dims(rank), io::Dims(rank)};
        for (std::size_t axis = 0; axis < rank; ++axis) {
            slab.offset[axis] = cell[axis] * box[axis];
            slab.count[axis] = std::min(box[axis], dims[axis] - slab.offset[axis]);
        }
        const std::size_t run_length = static_cast<std::size_t>(slab.count[rank - 1]);
        io::Dims within(rank, 0);
        io::Dims index(rank);
        std::size_t written = 0;
        do {
            for (std::size_t axis = 0; axis < rank; ++axis) index[axis] = slab.offset[axis] + within[axis];
            fill(index, run_length, run.data());
            unsigned char* out = buffer.data() + written * element_size;
            switch (type) {
                case io::MemType::f32: store<float>(run, run_length, out); break;
                case io::MemType::f64: store<double>(run, run_length, out); break;
                default: store<std::int32_t>(run, run_length, out); break;
            }
            written += run_length;
        } while (next_index(within, slab.count, 1));
        io::write_slab(dataset, slab, type, buffer.data(), written);
    } while (next_index(cell, grid, 0));
}

}  // namespace attnbatch::cli
