// `attnbatch generate`: what it writes, read back through the io layer and h5py.
#include "support/attnbatch_binary.hpp"
#include "support/child_process.hpp"
#include "support/file_bytes.hpp"
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

namespace attnbatch::testing {
namespace {

using Args = std::vector<std::string>;

Outcome generate(const std::string& output, Args args) {
    args.insert(args.begin(), {"generate", "--output", output});
    return attnbatch(args);
}

template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

TEST(Generate, WritesEmbeddingsAndNoLengthsByDefault) {
    const TempDir dir;
    const std::string path = dir.file("in.h5");
    const Outcome run = generate(path, {"--num-seqs", "3", "--seq-len", "5", "--dim", "4"});
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(line_count(run.out), 1u) << run.out;
    EXPECT_NE(run.out.find(path), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("/embeddings float32 [3, 5, 4]"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find(" bytes"), std::string::npos) << run.out;
    EXPECT_EQ(dataset_dims(path, "/embeddings"), (io::Dims{3, 5, 4}));
    EXPECT_EQ(dataset_type(path, "/embeddings").name(), "float32");
    EXPECT_FALSE(has_object(path, "/lengths"));
    EXPECT_FALSE(exists(path + ".partial"));
}

TEST(Generate, SameSeedGivesSameNumbersAndAnotherSeedOthers) {
    const TempDir dir;
    const Args shape{"--num-seqs", "6", "--seq-len", "9", "--dim", "5", "--min-len", "2"};
    for (const auto& [name, seed] : {std::pair{"a.h5", "11"}, std::pair{"b.h5", "11"}, std::pair{"c.h5", "12"}}) {
        Args args = shape;
        args.insert(args.end(), {"--seed", seed});
        ASSERT_EQ(generate(dir.file(name), args).status, 0);
    }
    const auto a = read_dataset<float>(dir.file("a.h5"), "/embeddings");
    const auto b = read_dataset<float>(dir.file("b.h5"), "/embeddings");
    const auto c = read_dataset<float>(dir.file("c.h5"), "/embeddings");
    EXPECT_TRUE(same_bytes(a, b));
    EXPECT_FALSE(same_bytes(a, c));
    EXPECT_TRUE(same_bytes(read_dataset<std::int32_t>(dir.file("a.h5"), "/lengths"),
                           read_dataset<std::int32_t>(dir.file("b.h5"), "/lengths")));
}

// The counter-based generator: the numbers do not depend on how the file was cut into writes,
// even when a slab is smaller than one sequence (cut along inner axes).
TEST(Generate, ContentDoesNotDependOnTheSlabSize) {
    const TempDir dir;
    for (const Args& extra : {Args{}, Args{"--qkv", "--qkv-layout", "split", "--heads", "2"}}) {
        Args args{"--num-seqs", "5", "--seq-len", "7", "--dim", "6", "--min-len", "3", "--seed", "4", "--force"};
        args.insert(args.end(), extra.begin(), extra.end());
        ASSERT_EQ(generate(dir.file("whole.h5"), args).status, 0);
        args.insert(args.end(), {"--slab-bytes", "20"});
        ASSERT_EQ(generate(dir.file("cut.h5"), args).status, 0);
        const std::string dataset = extra.empty() ? "/embeddings" : "/value";
        EXPECT_TRUE(same_bytes(read_dataset<float>(dir.file("whole.h5"), dataset),
                               read_dataset<float>(dir.file("cut.h5"), dataset)))
            << dataset;
    }
}

TEST(Generate, RaggedLengthsAreInRangeWithZeroPadding) {
    const TempDir dir;
    const std::string path = dir.file("ragged.h5");
    const std::int64_t n = 60, len = 20, d = 3, min_len = 5;
    const Outcome run = generate(path, {"--num-seqs", "60", "--seq-len", "20", "--dim", "3", "--min-len", "5"});
    ASSERT_EQ(run.status, 0) << run.err;
    ASSERT_EQ(dataset_type(path, "/lengths").name(), "int32");
    const auto lengths = read_dataset<std::int32_t>(path, "/lengths");
    ASSERT_EQ(lengths.size(), static_cast<std::size_t>(n));
    const auto [low, high] = std::minmax_element(lengths.begin(), lengths.end());
    EXPECT_GE(*low, min_len);
    EXPECT_LE(*high, len);
    EXPECT_GT(*high - *low, 5) << "60 draws from [5, 20] should spread";
    const auto x = read_dataset<float>(path, "/embeddings");
    for (std::int64_t s = 0; s < n; ++s) {
        for (std::int64_t t = 0; t < len; ++t) {
            for (std::int64_t c = 0; c < d; ++c) {
                const float value = x[static_cast<std::size_t>((s * len + t) * d + c)];
                if (t >= lengths[static_cast<std::size_t>(s)]) {
                    ASSERT_EQ(value, 0.0f) << "padding at sequence " << s << " token " << t;
                } else {
                    ASSERT_NE(value, 0.0f) << "valid token " << t << " of sequence " << s;
                }
            }
        }
    }
}

TEST(Generate, MinLenEqualToSeqLenWritesFullLengths) {
    const TempDir dir;
    const std::string path = dir.file("full.h5");
    ASSERT_EQ(generate(path, {"--num-seqs", "4", "--seq-len", "6", "--dim", "2", "--min-len", "6"}).status, 0);
    EXPECT_EQ(read_dataset<std::int32_t>(path, "/lengths"), (std::vector<std::int32_t>{6, 6, 6, 6}));
}

TEST(Generate, WeightsFileHasTheRequestedShapes) {
    const TempDir dir;
    const std::string input = dir.file("in.h5"), weights = dir.file("w.h5");
    Outcome run = generate(input, {"--num-seqs", "2", "--seq-len", "4", "--dim", "12", "--heads", "3", "--weights-out",
                               weights, "--head-dim", "5", "--value-dim", "6", "--out-dim", "7"});
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(line_count(run.out), 2u) << run.out;
    const std::vector<std::pair<std::string, io::Dims>> expected{
        {"/w_q", {12, 15}}, {"/w_k", {12, 15}}, {"/w_v", {12, 18}}, {"/w_o", {18, 7}},
        {"/b_q", {15}},     {"/b_k", {15}},     {"/b_v", {18}},     {"/b_o", {7}}};
    for (const auto& [name, dims] : expected) EXPECT_EQ(dataset_dims(weights, name), dims) << name;
    EXPECT_EQ(attnbatch({"inspect", input, "--heads", "3", "--weights", weights}).status, 0);

    // Defaults d_k = d/H, d_v = d_k, d_out = d; and the optional parts left out.
    run = generate(input, {"--force", "--dim", "12", "--heads", "4", "--weights-out", weights, "--no-bias",
                           "--no-output-projection"});
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(dataset_dims(weights, "/w_q"), (io::Dims{12, 12}));
    EXPECT_EQ(dataset_dims(weights, "/w_v"), (io::Dims{12, 12}));
    for (const char* absent : {"/w_o", "/b_q", "/b_k", "/b_v", "/b_o"}) EXPECT_FALSE(has_object(weights, absent)) << absent;
    run = generate(input, {"--force", "--dim", "12", "--heads", "4", "--weights-out", weights});
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(dataset_dims(weights, "/w_o"), (io::Dims{12, 12}));
    EXPECT_EQ(dataset_dims(weights, "/b_o"), (io::Dims{12}));
}

TEST(Generate, QkvPackedWritesQueryKeyValueInsteadOfEmbeddings) {
    const TempDir dir;
    const std::string path = dir.file("qkv.h5");
    const Outcome run = generate(path, {"--qkv", "--num-seqs", "3", "--seq-len", "5", "--dim", "8", "--heads", "2",
                                    "--value-dim", "3"});
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(dataset_dims(path, "/query"), (io::Dims{3, 5, 8}));
    EXPECT_EQ(dataset_dims(path, "/key"), (io::Dims{3, 5, 8}));
    EXPECT_EQ(dataset_dims(path, "/value"), (io::Dims{3, 5, 6}));
    EXPECT_FALSE(has_object(path, "/embeddings"));
    EXPECT_FALSE(same_bytes(read_dataset<float>(path, "/query"), read_dataset<float>(path, "/key")));
}

TEST(Generate, QkvSplitIsThePackedLayoutWithHeadsMovedForward) {
    const TempDir dir;
    const std::size_t n = 3, heads = 2, len = 4, d_k = 5;
    const Args args{"--qkv", "--num-seqs", "3", "--seq-len", "4", "--heads", "2", "--head-dim", "5", "--min-len", "1", "--seed", "8"};
    Args split = args;
    split.insert(split.end(), {"--qkv-layout", "split"});
    ASSERT_EQ(generate(dir.file("packed.h5"), args).status, 0);
    ASSERT_EQ(generate(dir.file("split.h5"), split).status, 0);
    EXPECT_EQ(dataset_dims(dir.file("split.h5"), "/key"), (io::Dims{n, heads, len, d_k}));
    const auto packed = read_dataset<float>(dir.file("packed.h5"), "/key");
    const auto moved = read_dataset<float>(dir.file("split.h5"), "/key");
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t h = 0; h < heads; ++h)
            for (std::size_t t = 0; t < len; ++t)
                for (std::size_t c = 0; c < d_k; ++c)
                    ASSERT_EQ(moved[((s * heads + h) * len + t) * d_k + c], packed[(s * len + t) * heads * d_k + h * d_k + c]);
}

TEST(Generate, Float64HoldsTheSameNumbersUnrounded) {
    const TempDir dir;
    const Args args{"--num-seqs", "3", "--seq-len", "4", "--dim", "5", "--seed", "3"};
    Args wide = args;
    wide.insert(wide.end(), {"--dtype", "float64"});
    ASSERT_EQ(generate(dir.file("f32.h5"), args).status, 0);
    ASSERT_EQ(generate(dir.file("f64.h5"), wide).status, 0);
    EXPECT_EQ(dataset_type(dir.file("f64.h5"), "/embeddings").name(), "float64");
    const auto narrow = read_dataset<float>(dir.file("f32.h5"), "/embeddings");
    const auto exact = read_dataset<double>(dir.file("f64.h5"), "/embeddings");
    ASSERT_EQ(narrow.size(), exact.size());
    bool any_inexact = false;
    for (std::size_t i = 0; i < exact.size(); ++i) {
        ASSERT_EQ(static_cast<float>(exact[i]), narrow[i]) << i;
        any_inexact |= static_cast<double>(narrow[i]) != exact[i];
    }
    EXPECT_TRUE(any_inexact) << "float64 data should carry more than float32 precision";
}

TEST(Generate, ScaleValuesMultipliesTheData) {
    const TempDir dir;
    const Args args{"--num-seqs", "2", "--seq-len", "3", "--dim", "4"};
    Args scaled = args;
    scaled.insert(scaled.end(), {"--scale-values", "32"});  // a power of two: exact in float
    ASSERT_EQ(generate(dir.file("one.h5"), args).status, 0);
    ASSERT_EQ(generate(dir.file("big.h5"), scaled).status, 0);
    const auto base = read_dataset<float>(dir.file("one.h5"), "/embeddings");
    const auto big = read_dataset<float>(dir.file("big.h5"), "/embeddings");
    ASSERT_EQ(base.size(), big.size());
    for (std::size_t i = 0; i < base.size(); ++i) ASSERT_EQ(big[i], 32.0f * base[i]);
}

TEST(Generate, RefusesToOverwriteWithoutForce) {
    const TempDir dir;
    const std::string path = dir.file("keep.h5"), weights = dir.file("w.h5");
    ASSERT_EQ(generate(path, {"--num-seqs", "2", "--seq-len", "3", "--dim", "4", "--seed", "1"}).status, 0);
    const std::string before = digest(path);
    ASSERT_FALSE(before.empty());

    Outcome run = generate(path, {"--num-seqs", "2", "--seq-len", "3", "--dim", "4", "--seed", "2"});
    EXPECT_EQ(run.status, 2);
    EXPECT_NE(run.err.find("--output"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("exists"), std::string::npos) << run.err;
    EXPECT_EQ(line_count(run.err), 1u) << run.err;
    EXPECT_EQ(digest(path), before);

    // An existing --weights-out is refused before anything is written, the input included.
    write_text(weights, "not yet");
    run = generate(dir.file("new.h5"), {"--weights-out", weights});
    EXPECT_EQ(run.status, 2);
    EXPECT_NE(run.err.find("--weights-out"), std::string::npos) << run.err;
    EXPECT_FALSE(exists(dir.file("new.h5")));
    EXPECT_EQ(read_dataset<float>(path, "/embeddings").size(), 24u);

    run = generate(path, {"--num-seqs", "2", "--seq-len", "3", "--dim", "4", "--seed", "2", "--force"});
    EXPECT_EQ(run.status, 0) << run.err;
    EXPECT_NE(digest(path), before);
    EXPECT_FALSE(exists(path + ".partial"));
}

TEST(Generate, ConfigFileAndEnvironmentSupplyOptions) {
    const TempDir dir;
    const std::string config = dir.file("attnbatch.ini"), path = dir.file("in.h5");
    write_text(config, "seq-len = 3\n[generate]\nnum-seqs = 7\ndim = 2\n[run]\nheads = 5\n");
    const Outcome run = attnbatch({"generate", "--output", path, "--config", config}, {{"ATTNBATCH_DIM", "6"}});
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(dataset_dims(path, "/embeddings"), (io::Dims{7, 3, 6}));  // the environment beats the file
}

// Another reader's view: h5py sees the shapes, dtypes, chunks along whole sequences, labels,
// attributes, and the statistics promised (standard normal data, N(0, 1/d) weights).
TEST(Generate, H5pySeesTheDocumentedFile) {
    if (!h5py_available()) GTEST_SKIP() << "no h5py for " << ATTNBATCH_H5PY_PYTHON;
    const TempDir dir;
    const std::string input = dir.file("in.h5"), weights = dir.file("w.h5"), qkv = dir.file("qkv.h5");
    ASSERT_EQ(generate(input, {"--num-seqs", "40", "--seq-len", "64", "--dim", "32", "--min-len", "8", "--heads", "4",
                               "--weights-out", weights, "--seed", "5"}).status, 0);
    ASSERT_EQ(generate(qkv, {"--qkv", "--qkv-layout", "split", "--num-seqs", "3", "--seq-len", "16", "--dim", "16",
                             "--heads", "4", "--dtype", "float64"}).status, 0);
    const Outcome check = python(R"(
import sys, h5py, numpy as np
inp, w, qkv = sys.argv[1:4]
with h5py.File(inp, "r") as f:
    x, lengths = f["embeddings"], f["lengths"][...]
    assert x.shape == (40, 64, 32) and x.dtype == np.float32, (x.shape, x.dtype)
    assert lengths.dtype == np.int32 and lengths.shape == (40,)
    assert lengths.min() >= 8 and lengths.max() <= 64, (lengths.min(), lengths.max())
    assert x.chunks[1:] == (64, 32), x.chunks
    assert [d.label for d in x.dims] == ["N", "L", "d"]
    assert f.attrs["seed"] == 5 and f.attrs["heads"] == 4 and f.attrs["format"] == "attnbatch-input"
    data = x[...]
    valid = np.arange(64)[None, :] < lengths[:, None]
    assert np.all(data[~valid] == 0)
    v = data[valid]
    assert abs(v.mean()) < 0.05 and abs(v.std() - 1) < 0.05, (v.mean(), v.std())
with h5py.File(w, "r") as f:
    assert f["w_q"].shape == (32, 32) and f["w_o"].shape == (32, 32) and f["b_o"].shape == (32,)
    s = np.concatenate([f[k][...].ravel() for k in ("w_q", "w_k", "w_v")]).std()
    assert abs(s * np.sqrt(32) - 1) < 0.1, s
with h5py.File(qkv, "r") as f:
    assert "embeddings" not in f
    for k in ("query", "key", "value"):
        assert f[k].shape == (3, 4, 16, 4) and f[k].dtype == np.float64, (k, f[k].shape, f[k].dtype)
print("ok")
)",
                             {input, weights, qkv});
    EXPECT_EQ(check.status, 0) << check.out;
}

}  // namespace
}  // namespace attnbatch::testing
