// `attnbatch inspect`: inputs from `generate`, outputs from the io layer's OutputFile (as
// `run` writes them), and files broken in one way each.
#include "attnbatch/io/h5/h5.hpp"
#include "attnbatch/io/output/output_file.hpp"
#include "support/attnbatch_binary.hpp"
#include "support/child_process.hpp"
#include "support/expect_mentions.hpp"
#include "support/file_bytes.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <limits>

namespace attnbatch::testing {
namespace {

using Args = std::vector<std::string>;

template <class T>
void put(const io::File& file, const std::string& path, const io::Datatype& type, const io::Dims& dims, T value) {
    const std::vector<T> values(io::element_count(dims), value);
    const io::Dataset dataset = io::Dataset::create(file, path, type, dims);
    io::write_slab(dataset, io::Slab{}, values.data(), values.size());
}

// An output as `run` writes it: N = 4, L = 8, H = 2, D_out = 6, with sequences [0, written)
// written; finalized (complete, renamed) only when `finalize`.
void make_output(const std::string& path, std::int64_t written, bool finalize, io::OutputLayout layout = {}) {
    if (layout.n == 0) {
        layout.n = 4;
        layout.len = 8;
        layout.heads = 2;
        layout.d_out = 6;
    }
    io::Provenance provenance;
    provenance.version = "test";
    provenance.input_file = "in.h5";
    provenance.input_dataset = "/embeddings";
    provenance.heads = layout.heads;
    provenance.attention.scale = 0.5;
    provenance.config = "heads = 2\n";
    io::OutputFile out = io::OutputFile::create(path, layout, provenance);
    const auto n = static_cast<std::size_t>(written), len = static_cast<std::size_t>(layout.len);
    const auto [wfirst, wlast] = layout.weights_range(0, written);
    const auto nw = static_cast<std::size_t>(wlast - wfirst);
    const std::vector<float> output(n * len * static_cast<std::size_t>(layout.d_out), 0.5f);
    const std::vector<float> lse(n * static_cast<std::size_t>(layout.heads) * len, 1.0f);
    const std::vector<std::int32_t> lengths(n, static_cast<std::int32_t>(layout.len));
    const std::size_t weights = nw * static_cast<std::size_t>(layout.weights_heads()) * len * len;
    const std::vector<float> attention(weights, 0.125f);
    const std::vector<std::uint16_t> half(weights, 0x3000);  // 0.125 in binary16
    io::OutputBlock block;
    block.output = output.data();
    block.lse = lse.data();
    block.lengths = lengths.data();
    block.attention_f32 = attention.data();
    block.attention_f16 = half.data();
    out.write_block(0, written, block);
    if (finalize) {
        out.finalize();
    } else {
        out.flush();  // then dropped, as by a crash: OUTPUT.partial stays with complete = 0
    }
}

TEST(Inspect, GeneratedInputIsValid) {
    const TempDir dir;
    const std::string path = dir.file("in.h5");
    ASSERT_EQ(attnbatch({"generate", "--output", path, "--num-seqs", "4", "--seq-len", "16", "--dim", "8", "--min-len",
                         "3"}).status, 0);
    const Outcome run = attnbatch({"inspect", path, "--heads", "2"});
    EXPECT_EQ(run.status, 0) << run.err;
    EXPECT_TRUE(run.err.empty()) << run.err;
    expect_mentions(run.out, "valid input: N=4, L=16, d=8, H=2");
    expect_mentions(run.out, "/embeddings  float32  [4, 16, 8]");
    expect_mentions(run.out, "labels (N, L, d)");
    expect_mentions(run.out, "seed = 0");
    EXPECT_EQ(attnbatch({"inspect", "--file", path, "--quick"}).status, 0);
}

TEST(Inspect, GeneratedQkvInputsAreValidInBothLayouts) {
    const TempDir dir;
    for (const char* layout : {"packed", "split"}) {
        const std::string path = dir.file(std::string(layout) + ".h5");
        ASSERT_EQ(attnbatch({"generate", "--output", path, "--qkv", "--qkv-layout", layout, "--num-seqs", "2", "--seq-len",
                             "8", "--dim", "8", "--heads", "4"}).status, 0);
        const Outcome run = attnbatch({"inspect", path, "--heads", "4"});
        EXPECT_EQ(run.status, 0) << run.err;
        expect_mentions(run.out, "valid input: N=2, L=8, H=4 (d_k=2, d_v=2");
        expect_mentions(run.out, std::string(layout) + " [");
    }
}

TEST(Inspect, WeightsAreCheckedAgainstTheInput) {
    const TempDir dir;
    const std::string input = dir.file("in.h5"), weights = dir.file("w.h5"), other = dir.file("other.h5");
    ASSERT_EQ(attnbatch({"generate", "--output", input, "--dim", "8", "--heads", "2", "--weights-out", weights}).status, 0);
    ASSERT_EQ(attnbatch({"generate", "--output", other, "--dim", "6", "--heads", "2", "--weights-out", dir.file("w6.h5")}).status, 0);
    Outcome run = attnbatch({"inspect", input, "--heads", "2", "--weights", weights});
    EXPECT_EQ(run.status, 0) << run.err;
    expect_mentions(run.out, "weights " + weights + " giving D_out=8");
    run = attnbatch({"inspect", other, "--heads", "2", "--weights", weights});
    EXPECT_EQ(run.status, 3);
    expect_mentions(run.err, "/w_q");
    run = attnbatch({"inspect", weights});
    EXPECT_EQ(run.status, 0) << run.err;
    expect_mentions(run.out, "valid weights: d=8, H*d_k=8, H*d_v=8, d_out=8");
}

TEST(Inspect, OutputIsIncompleteBeforeFinalizeAndValidAfter) {
    const TempDir dir;
    const std::string path = dir.file("out.h5");
    make_output(path, 2, false);
    const std::string partial = path + ".partial";
    ASSERT_TRUE(exists(partial));
    ASSERT_FALSE(exists(path));
    Outcome run = attnbatch({"inspect", partial});
    EXPECT_EQ(run.status, 3);
    expect_mentions(run.out, "output in progress");
    expect_mentions(run.out, "INCOMPLETE (attribute complete = 0)");
    expect_mentions(run.out, "2 of 4 sequences written");
    EXPECT_EQ(line_count(run.err), 1u) << run.err;

    // The same file under a final name: incomplete, not "in progress".
    ASSERT_EQ(std::rename(partial.c_str(), dir.file("renamed.h5").c_str()), 0);
    run = attnbatch({"inspect", dir.file("renamed.h5")});
    EXPECT_EQ(run.status, 3);
    expect_mentions(run.out, "INCOMPLETE (attribute complete = 0): 2 of 4 sequences written");

    make_output(path, 4, true);
    run = attnbatch({"inspect", path});
    EXPECT_EQ(run.status, 0) << run.err;
    expect_mentions(run.out, "valid output: N=4, L=8, D_out=6, H=2, attention float32 for sequences [0, 4)");
    expect_mentions(run.out, "complete = 1");
}

// While a run writes OUTPUT.partial, HDF5's lock (when the file system has locks) keeps
// readers out; either way the answer is "in progress", exit 3, never a crash or exit 0.
TEST(Inspect, PartialOutputHeldOpenByItsWriterIsInProgress) {
    const TempDir dir;
    const std::string path = dir.file("live.h5");
    io::OutputLayout layout;
    layout.n = 2;
    layout.len = 4;
    layout.heads = 1;
    layout.d_out = 3;
    io::Provenance provenance;
    provenance.config = "x";
    io::OutputFile writer = io::OutputFile::create(path, layout, provenance);
    const Outcome run = attnbatch({"inspect", writer.partial_path()});
    EXPECT_EQ(run.status, 3) << run.out << run.err;
    expect_mentions(run.err, "in progress");
}

TEST(Inspect, OutputWithAWeightsSubsetInHalfPrecision) {
    const TempDir dir;
    const std::string path = dir.file("out.h5");
    io::OutputLayout layout;
    layout.n = 5;
    layout.len = 4;
    layout.heads = 3;
    layout.d_out = 2;
    layout.save_weights = io::SaveWeights::mean;
    layout.weights_dtype = io::WeightsDtype::f16;
    layout.weights_first = 1;
    layout.weights_last = 3;
    layout.gzip_level = 4;
    make_output(path, 5, true, layout);
    const Outcome run = attnbatch({"inspect", path});
    EXPECT_EQ(run.status, 0) << run.err;
    expect_mentions(run.out, "attention float16 for sequences [1, 3) (mean over heads)");
    expect_mentions(run.out, "/attention  float16  [2, 1, 4, 4]");
    expect_mentions(run.out, "@first_sequence = 1");
    expect_mentions(run.out, "filters shuffle+deflate");
    expect_mentions(run.out, "labels (N, H, L_q, L_k)");
}

// An output whose datasets disagree: the message names the dataset and both shapes.
TEST(Inspect, InconsistentOutputNamesTheDataset) {
    const TempDir dir;
    const std::string path = dir.file("bad.h5");
    {
        const io::File file = io::File::create(path);
        put(file, "/output", io::Datatype::float32(), {2, 4, 8}, 0.0f);
        put(file, "/lse", io::Datatype::float32(), {2, 1, 5}, 0.0f);
        put(file, "/lengths", io::Datatype::int32(), {2}, std::int32_t{4});
        io::write_text_dataset(file, "/config", "x = 1");
        io::set_int_attribute(file, "complete", 1);
    }
    Outcome run = attnbatch({"inspect", path});
    EXPECT_EQ(run.status, 3);
    expect_mentions(run.err, "/lse has shape [2, 1, 5], expected [N, H, L] with L = 4 (from /output [2, 4, 8])");

    // complete = 1 while a sequence was never written.
    const std::string unwritten = dir.file("unwritten.h5");
    {
        const io::File file = io::File::create(unwritten);
        put(file, "/output", io::Datatype::float32(), {2, 4, 8}, 0.0f);
        put(file, "/lse", io::Datatype::float32(), {2, 1, 4}, 0.0f);
        put(file, "/lengths", io::Datatype::int32(), {2}, std::int32_t{-1});
        io::write_text_dataset(file, "/config", "x = 1");
        io::set_int_attribute(file, "complete", 1);
    }
    run = attnbatch({"inspect", unwritten});
    EXPECT_EQ(run.status, 3);
    expect_mentions(run.err, "complete = 1 but 2 of 2 sequences are unwritten");
}

TEST(Inspect, GarbageFileIsInvalid) {
    const TempDir dir;
    const std::string path = dir.file("garbage.h5");
    write_text(path, std::string(4096, '\x5a') + "not hdf5 at all");
    const Outcome run = attnbatch({"inspect", path});
    EXPECT_EQ(run.status, 3);
    expect_mentions(run.err, "not an HDF5 file");
    EXPECT_TRUE(run.out.empty()) << run.out;
}

TEST(Inspect, MissingFileIsUnreadable) {
    const TempDir dir;
    const Outcome run = attnbatch({"inspect", dir.file("nowhere.h5")});
    EXPECT_EQ(run.status, 4);
    expect_mentions(run.err, "nowhere.h5: cannot open: No such file or directory");
    EXPECT_EQ(line_count(run.err), 1u);
}

// The opening checks of run's inputs: a FIFO with no writer would block the open forever.
TEST(Inspect, FifoIsRefusedNotWaitedOn) {
    const TempDir dir;
    const std::string path = dir.file("stream.h5");
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    const Outcome run = attnbatch({"inspect", path});
    EXPECT_EQ(run.status, 4);
    expect_mentions(run.err, path + ": is a FIFO, expected a regular HDF5 file");
    EXPECT_EQ(line_count(run.err), 1u) << run.err;
}

TEST(Inspect, WrongRankDatasetIsNamed) {
    const TempDir dir;
    const std::string path = dir.file("flat.h5");
    {
        const io::File file = io::File::create(path);
        put(file, "/embeddings", io::Datatype::float32(), {4, 8}, 1.0f);
    }
    const Outcome run = attnbatch({"inspect", path});
    EXPECT_EQ(run.status, 3);
    expect_mentions(run.err, "dataset /embeddings has shape [4, 8] (rank 2), expected [N, L, d] (rank 3)");
    expect_mentions(run.out, "/embeddings  float32  [4, 8]");  // the schema is still shown
}

TEST(Inspect, NonFiniteValuesAreFoundUnlessQuick) {
    const TempDir dir;
    const std::string path = dir.file("nan.h5");
    {
        const io::File file = io::File::create(path);
        put(file, "/embeddings", io::Datatype::float32(), {2, 3, 4}, std::numeric_limits<float>::quiet_NaN());
    }
    Outcome run = attnbatch({"inspect", path});
    EXPECT_EQ(run.status, 3);
    expect_mentions(run.err, "non-finite");
    run = attnbatch({"inspect", path, "--quick"});
    EXPECT_EQ(run.status, 0) << run.err;
    expect_mentions(run.out, "values not scanned (--quick)");
}

TEST(Inspect, FileThatIsNeitherInputNorOutput) {
    const TempDir dir;
    const std::string path = dir.file("other.h5");
    {
        const io::File file = io::File::create(path);
        put(file, "/group/table", io::Datatype::int64(), {3}, std::int64_t{7});
    }
    Outcome run = attnbatch({"inspect", path});
    EXPECT_EQ(run.status, 3);
    expect_mentions(run.err, "neither an attnbatch input nor an output");
    expect_mentions(run.out, "/group/table");
    run = attnbatch({"inspect", path, "--dataset", "/group/table"});  // as an input: named, with its dtype
    EXPECT_EQ(run.status, 3);
    expect_mentions(run.err, "dataset /group/table has dtype int64, expected float32 or float64");
}

TEST(Inspect, UsageErrorsExitTwo) {
    const TempDir dir;
    const std::string path = dir.file("in.h5");
    ASSERT_EQ(attnbatch({"generate", "--output", path}).status, 0);
    for (const Args& args : {Args{"inspect"}, Args{"inspect", path, path}, Args{"inspect", path, "--bogus"},
                             Args{"inspect", path, "--as", "sideways"}, Args{"inspect", path, "--heads", "0"},
                             Args{"inspect", path, "--heads", "3"}}) {
        const Outcome run = attnbatch(args);
        EXPECT_EQ(run.status, 2) << args.back() << ": " << run.err;
        EXPECT_EQ(line_count(run.err), 1u) << run.err;
    }
}

TEST(Inspect, JsonSummaryIsOneObject) {
    if (!h5py_available()) GTEST_SKIP() << "no python3 for " << ATTNBATCH_H5PY_PYTHON;
    const TempDir dir;
    const std::string input = dir.file("in.h5"), output = dir.file("out.h5");
    ASSERT_EQ(attnbatch({"generate", "--output", input, "--num-seqs", "3", "--seq-len", "5", "--dim", "4", "--min-len",
                         "2"}).status, 0);
    make_output(output, 4, true);
    const Outcome valid = attnbatch({"inspect", input, "--json"});
    const Outcome finished = attnbatch({"inspect", output, "--json"});
    const Outcome missing = attnbatch({"inspect", dir.file("missing.h5"), "--json"});
    ASSERT_EQ(valid.status, 0) << valid.err;
    ASSERT_EQ(finished.status, 0) << finished.err;
    ASSERT_EQ(missing.status, 4);
    write_text(dir.file("valid.json"), valid.out);
    write_text(dir.file("finished.json"), finished.out);
    write_text(dir.file("missing.json"), missing.out);
    const Outcome check = python(R"(
import json, sys
valid, finished, missing = (json.load(open(p)) for p in sys.argv[1:4])
assert valid["kind"] == "input" and valid["valid"] is True and valid["exit_code"] == 0, valid
assert valid["input"]["n"] == 3 and valid["input"]["len"] == 5 and valid["input"]["d"] == 4, valid["input"]
assert valid["input"]["lengths"] == "/lengths" and valid["input"]["dtype"] == "float32"
paths = [d["path"] for d in valid["schema"]["datasets"]]
assert paths == ["/embeddings", "/lengths"], paths
assert valid["schema"]["datasets"][0]["labels"] == ["N", "L", "d"]
assert valid["schema"]["attributes"]["format"] == "attnbatch-input"
assert finished["kind"] == "output" and finished["output"]["complete"] is True
assert finished["output"]["attention"]["heads"] == 2 and finished["output"]["written"] == 4
assert missing["kind"] == "unreadable" and missing["exit_code"] == 4 and missing["schema"] is None
assert "No such file" in missing["message"]
print("ok")
)",
                             {dir.file("valid.json"), dir.file("finished.json"), dir.file("missing.json")});
    EXPECT_EQ(check.status, 0) << check.out;
    EXPECT_EQ(line_count(valid.out), 1u);
}

}  // namespace
}  // namespace attnbatch::testing
