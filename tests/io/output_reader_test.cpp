// The output reader against the output writer: an output written by OutputFile reads back
// through OutputReader with its layout, provenance and recorded options, and every row as
// written (weights subsets, the head mean, float16 bits); reads of what is not there fail.
#include "support/file_bytes.hpp"
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"

#include "attnbatch/io/output/attention_maps.hpp"
#include "attnbatch/io/output/output_reader.hpp"
#include "attnbatch/io/h5/attribute.hpp"
#include "attnbatch/io/h5/schema_names.hpp"
#include "support/output_fixtures.hpp"

#include <hdf5.h>
#include <unistd.h>

namespace attnbatch::io {
namespace {

using testing::provenance;
using testing::RunData;
using testing::small_layout;
using testing::write_all;

template <class T>
std::vector<T> slice(const std::vector<T>& values, std::size_t first, std::size_t count) {
    return std::vector<T>(values.begin() + static_cast<std::ptrdiff_t>(first),
                          values.begin() + static_cast<std::ptrdiff_t>(first + count));
}

void write_output(const std::string& path, const OutputLayout& layout, const RunData& data, bool complete) {
    OutputFile out = OutputFile::create(path, layout, provenance());
    write_all(out, data, 2);
    if (complete) {
        out.finalize();
    } else {
        out.close_incomplete();
    }
}

TEST(OutputReader, LayoutProvenanceAndRowsOfACompleteOutput) {
    const testing::TempDir dir;
    const std::string path = dir.file("out.h5");
    const OutputLayout layout = small_layout();  // N = 4, L = 3, H = 2, D_out = 5, all weights, f32
    const RunData data(layout);
    write_output(path, layout, data, true);

    const OutputReader reader(path);
    EXPECT_TRUE(reader.complete());
    EXPECT_EQ(reader.path(), path);
    const OutputLayout& read = reader.layout();
    EXPECT_EQ(read.n, 4);
    EXPECT_EQ(read.len, 3);
    EXPECT_EQ(read.heads, 2);
    EXPECT_EQ(read.d_out, 5);
    EXPECT_EQ(read.save_weights, SaveWeights::all);
    EXPECT_EQ(read.weights_dtype, WeightsDtype::f32);
    EXPECT_EQ(read.weights_first, 0);
    EXPECT_EQ(read.weights_end(), 4);
    EXPECT_TRUE(reader.has_attention());

    const Provenance written = provenance();
    const Provenance recorded = reader.provenance();
    EXPECT_EQ(recorded.version, written.version);
    EXPECT_FALSE(recorded.creation_time.empty());
    EXPECT_EQ(recorded.input_file, written.input_file);
    EXPECT_EQ(recorded.input_dataset, written.input_dataset);
    EXPECT_EQ(recorded.heads, written.heads);
    EXPECT_EQ(recorded.attention.causal, written.attention.causal);
    EXPECT_EQ(recorded.attention.scale, written.attention.scale);
    EXPECT_EQ(recorded.attention.rope_theta, written.attention.rope_theta);
    EXPECT_EQ(recorded.attention.precision, written.attention.precision);
    EXPECT_EQ(recorded.ranks, written.ranks);
    EXPECT_EQ(recorded.threads, written.threads);
    EXPECT_EQ(recorded.io_mode, written.io_mode);
    EXPECT_EQ(recorded.config, written.config);
    EXPECT_EQ(reader.config(), written.config);
    const std::map<std::string, std::string> options = reader.recorded_options();
    EXPECT_EQ(options.at("input"), "in.h5");
    EXPECT_EQ(options.at("heads"), "2");

    OutputRows rows;
    reader.read(1, 3, rows);
    EXPECT_EQ(rows.first, 1);
    EXPECT_EQ(rows.count, 2);
    EXPECT_EQ(rows.output, slice(data.output, 15, 30));
    EXPECT_EQ(rows.lse, slice(data.lse, 6, 12));
    EXPECT_EQ(rows.lengths, slice(data.lengths, 1, 2));
    EXPECT_EQ(rows.attention, slice(data.attention, 18, 36));
    EXPECT_TRUE(rows.attention_f16.empty());

    std::vector<float> lse;
    reader.read_lse(3, 4, lse);
    EXPECT_EQ(lse, slice(data.lse, 18, 6));
    std::vector<float> none;
    reader.read_output(4, 4, none);
    EXPECT_TRUE(none.empty());
    EXPECT_THROW(reader.read_output(3, 5, none), std::invalid_argument);
    std::vector<std::uint16_t> bits;
    EXPECT_THROW(reader.read_attention(0, 1, bits), std::invalid_argument);  // f32 weights hold no f16 bits
}

TEST(OutputReader, HalfPrecisionMeanOverHeadsForASubset) {
    const testing::TempDir dir;
    const std::string path = dir.file("out.h5");
    OutputLayout layout = small_layout();
    layout.n = 6;
    layout.save_weights = SaveWeights::mean;
    layout.weights_dtype = WeightsDtype::f16;
    layout.weights_first = 2;
    layout.weights_last = 5;
    layout.gzip_level = 3;
    const RunData data(layout);
    write_output(path, layout, data, true);

    const OutputReader reader(path);
    const OutputLayout& read = reader.layout();
    EXPECT_EQ(read.n, 6);
    EXPECT_EQ(read.save_weights, SaveWeights::mean);
    EXPECT_EQ(read.weights_heads(), 1);
    EXPECT_EQ(read.weights_dtype, WeightsDtype::f16);
    EXPECT_EQ(read.weights_first, 2);
    EXPECT_EQ(read.weights_end(), 5);

    OutputRows rows;
    reader.read(0, 4, rows);  // weights only for sequences 2 and 3
    const std::size_t per_sequence = 3 * 3;
    EXPECT_EQ(rows.attention_f16, slice(data.attention_half, 2 * per_sequence, 2 * per_sequence));
    EXPECT_TRUE(rows.attention.empty());
    reader.read(0, 2, rows);  // none stored
    EXPECT_TRUE(rows.attention_f16.empty());

    std::vector<float> widened;
    reader.read_attention(4, 5, widened);  // HDF5 converts binary16 to float exactly
    EXPECT_EQ(widened, slice(data.attention, 4 * per_sequence, per_sequence));
    EXPECT_THROW(reader.read_attention(1, 3, widened), std::invalid_argument);  // sequence 1 has none
}

TEST(OutputReader, IncompleteOutputAndNoWeights) {
    const testing::TempDir dir;
    const std::string path = dir.file("out.h5");
    OutputLayout layout = small_layout();
    layout.save_weights = SaveWeights::none;
    const RunData data(layout);
    write_output(path, layout, data, false);

    const OutputReader reader(partial_path_for(path));
    EXPECT_FALSE(reader.complete());
    EXPECT_EQ(reader.layout().save_weights, SaveWeights::none);
    EXPECT_EQ(reader.layout().weights_count(), 0);
    EXPECT_FALSE(reader.has_attention());
    OutputRows rows;
    reader.read(0, 4, rows);
    EXPECT_EQ(rows.lengths, data.lengths);
    EXPECT_TRUE(rows.attention.empty());
    std::vector<float> attention;
    try {
        reader.read_attention(0, 1, attention);
        ADD_FAILURE() << "read weights that are not there";
    } catch (const Error& error) {
        EXPECT_EQ(error.exit_code(), exit_invalid_input);
        EXPECT_NE(std::string(error.what()).find(dataset::attention), std::string::npos) << error.what();
    }
}

// The attention settings as versions before the one codec wrote them (one attribute call each,
// under the docs/formats.md names), and as versions before rotary embeddings and bf16 left them (no
// rope_theta, no precision): both read back to the spec the run used.
TEST(OutputReader, AttentionSettingsOfEarlierVersions) {
    const testing::TempDir dir;
    const OutputLayout layout = small_layout();
    const RunData data(layout);
    const std::string path = dir.file("out.h5");
    write_output(path, layout, data, true);
    {
        const File file = File::open(path, FileMode::read_write);
        set_int_attribute(file, attribute::causal, 1);
        set_real_attribute(file, attribute::scale, 0.125);
        set_real_attribute(file, attribute::rope_theta, 500000.0);
        set_text_attribute(file, attribute::precision, "bf16");
    }
    kernels::AttentionSpec spec = OutputReader(path).provenance().attention;
    EXPECT_TRUE(spec.causal);
    EXPECT_EQ(spec.scale, 0.125);
    EXPECT_EQ(spec.rope_theta, 500000.0);
    EXPECT_EQ(spec.precision, kernels::Precision::bf16);
    {
        const File file = File::open(path, FileMode::read_write);
        for (const char* name : {attribute::rope_theta, attribute::precision}) {
            ASSERT_GE(H5Adelete(file.id(), name), 0) << name;
        }
        set_int_attribute(file, attribute::causal, 0);
    }
    spec = OutputReader(path).provenance().attention;
    EXPECT_FALSE(spec.causal);
    EXPECT_EQ(spec.scale, 0.125);
    EXPECT_EQ(spec.rope_theta, 0.0);
    EXPECT_EQ(spec.precision, kernels::Precision::fp32);
    {
        const File file = File::open(path, FileMode::read_write);
        set_text_attribute(file, attribute::precision, "fp16");
    }
    try {
        (void)OutputReader(path).provenance();
        ADD_FAILURE() << "a precision of fp16 was accepted";
    } catch (const Error& error) {
        EXPECT_EQ(error.exit_code(), exit_invalid_input);
        EXPECT_NE(std::string(error.what()).find("precision is 'fp16', expected fp32 or bf16"), std::string::npos) << error.what();
    }
}

TEST(OutputReader, FileThatIsNoOutput) {
    const testing::TempDir dir;
    const std::string path = dir.file("other.h5");
    {
        const File file = File::create(path);
        testing::put(file, "/embeddings", Datatype::float32(), {2, 3, 4}, testing::ramp(24));
    }
    const OutputReader reader(path);
    EXPECT_FALSE(reader.complete());
    EXPECT_EQ(reader.layout().n, 0);
    std::vector<float> output;
    EXPECT_THROW(reader.read_output(0, 0, output), Error);
    EXPECT_THROW(OutputReader(dir.file("missing.h5")), H5Error);
}

TEST(AttentionMaps, WrittenWholeAndReplacedOnlyWithForce) {
    const testing::TempDir dir;
    const std::string path = dir.file("maps.h5");
    AttentionMaps maps;
    maps.sequences = {3, 1};
    maps.heads = {0};
    maps.len = 2;
    maps.values = testing::ramp(8);
    maps.source = "out.h5";
    write_attention_maps(path, maps, false);
    EXPECT_NE(::access((path + ".partial").c_str(), F_OK), 0);
    {
        const File file = File::open(path, FileMode::read_only);
        const Dataset attention = Dataset::open(file, dataset::attention);
        EXPECT_EQ(attention.dims(), (Dims{2, 1, 2, 2}));
        EXPECT_EQ(read_all<float>(attention), maps.values);
        EXPECT_EQ(get_int_array_attribute(attention, attribute::sequences), maps.sequences);
        EXPECT_EQ(get_int_array_attribute(attention, attribute::heads), maps.heads);
        EXPECT_EQ(get_text_attribute(file, attribute::source), "out.h5");
    }
    EXPECT_THROW(write_attention_maps(path, maps, false), Error);
    maps.values.assign(8, 0.5f);
    write_attention_maps(path, maps, true);
    const File file = File::open(path, FileMode::read_only);
    EXPECT_EQ(read_all<float>(Dataset::open(file, dataset::attention)), maps.values);
    maps.values.pop_back();
    EXPECT_THROW(write_attention_maps(dir.file("short.h5"), maps, false), std::invalid_argument);
}

}  // namespace
}  // namespace attnbatch::io
