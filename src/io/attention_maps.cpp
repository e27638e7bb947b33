// Writing the attention maps of `weights`.
#include "attnbatch/io/attention_maps.hpp"

#include "attnbatch/io/h5_attribute.hpp"
#include "attnbatch/io/h5_dataset.hpp"
#include "attnbatch/io/output.hpp"
#include "attnbatch/io/schema_names.hpp"
#include "attnbatch/io/staged_file.hpp"

#include <unistd.h>

#include <stdexcept>

namespace attnbatch::io {

void write_attention_maps(const std::string& path, const AttentionMaps& maps, bool force) {
    const auto len = static_cast<hsize_t>(maps.len);
    const Dims dims{maps.sequences.size(), maps.heads.size(), len, len};
    if (maps.values.size() != element_count(dims)) {
        throw std::invalid_argument("write_attention_maps: " + std::to_string(maps.values.size()) +
                                    " values for the shape " + shape_text(dims));
    }
    ::unlink(OutputFile::partial_path_for(path).c_str());  // an earlier attempt's, if any
    StagedFile staged(path);
    {
        File file = staged.create();
        Dataset attention = Dataset::create(file, dataset::attention, Datatype::float32(), dims);
        write_slab(attention, Slab{}, maps.values.data(), maps.values.size());
        set_int_array_attribute(attention, attribute::sequences, maps.sequences);
        set_int_array_attribute(attention, attribute::heads, maps.heads);
        set_text_attribute(file, attribute::source, maps.source);
        attention.close();
        file.close();
    }
    staged.publish(force);
}

}  // namespace attnbatch::io
