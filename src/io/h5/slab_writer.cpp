// Box iteration and conversion for write_computed(), and the datasets made with it.
#include "h5/slab_writer.hpp"

#include "attnbatch/io/h5/chunking.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace attnbatch::io::detail {
namespace {

// Advances `index` over the box `count` in row-major order, the last `skip` axes excluded;
// false once every index has been visited.
bool next_index(Dims& index, const Dims& count, std::size_t skip) {
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

void write_computed(const Dataset& dataset, MemType type, std::size_t max_bytes, const ValueSource& fill) {
    if (type != MemType::f32 && type != MemType::f64 && type != MemType::i32) {
        throw std::invalid_argument("write_computed: memory type must be f32, f64 or i32");
    }
    const Dims dims = dataset.dims();
    if (dims.empty() || element_count(dims) == 0) return;
    const std::size_t element_size = mem_type_size(type);
    const Dims box = chunk_shape(dims, element_size, max_bytes);
    const std::size_t rank = dims.size();
    Dims grid(rank);
    for (std::size_t axis = 0; axis < rank; ++axis) grid[axis] = (dims[axis] + box[axis] - 1) / box[axis];

    std::vector<unsigned char> buffer(element_count(box) * element_size);
    std::vector<double> run(static_cast<std::size_t>(box[rank - 1]));
    Dims cell(rank, 0);
    do {
        Slab slab{Dims(rank), Dims(rank)};
        for (std::size_t axis = 0; axis < rank; ++axis) {
            slab.offset[axis] = cell[axis] * box[axis];
            slab.count[axis] = std::min(box[axis], dims[axis] - slab.offset[axis]);
        }
        const std::size_t run_length = static_cast<std::size_t>(slab.count[rank - 1]);
        Dims within(rank, 0);
        Dims index(rank);
        std::size_t written = 0;
        do {
            for (std::size_t axis = 0; axis < rank; ++axis) index[axis] = slab.offset[axis] + within[axis];
            fill(index, run_length, run.data());
            unsigned char* out = buffer.data() + written * element_size;
            switch (type) {
                case MemType::f32: store<float>(run, run_length, out); break;
                case MemType::f64: store<double>(run, run_length, out); break;
                default: store<std::int32_t>(run, run_length, out); break;
            }
            written += run_length;
        } while (next_index(within, slab.count, 1));
        write_slab(dataset, slab, type, buffer.data(), written);
    } while (next_index(cell, grid, 0));
}

WrittenDataset write_computed_dataset(const File& file, const std::string& path, MemType type, const Dims& dims,
                                      const std::vector<std::string>& labels, std::size_t slab_bytes,
                                      const ValueSource& fill) {
    DatasetCreation creation;
    creation.chunk = chunk_shape(dims, mem_type_size(type));
    const Datatype file_type = type == MemType::f64   ? Datatype::float64()
                               : type == MemType::i32 ? Datatype::int32()
                                                      : Datatype::float32();
    Dataset dataset = Dataset::create(file, path, file_type, dims, creation);
    set_dimension_labels(dataset, labels);
    write_computed(dataset, type, slab_bytes, fill);
    dataset.close();
    const char* name = type == MemType::f64 ? "float64" : type == MemType::i32 ? "int32" : "float32";
    return WrittenDataset{path, name, dims};
}

}  // namespace attnbatch::io::detail
