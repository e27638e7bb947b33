// The InputSpec codec (rank 0 validates, the other ranks decode) and the broadcasts of the
// spec and the projection weights, on P threads.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnbatch/distributed/spec_codec.hpp"
#include "support/thread_comm.hpp"

namespace attnbatch::distributed {
namespace {

using testing::run_ranks;

io::InputSpec spec_without_weights() {
    io::InputSpec s;
    s.path = "/data/run 7/input.h5";
    s.mode = io::InputMode::qkv;
    s.dataset = "";
    s.query = "/q";
    s.key = "/group/k";
    s.value = "/v\xc3\xa9";  // UTF-8 kept as bytes
    s.layout = io::QkvLayout::split;
    s.lengths = "/lengths";
    s.n = 10'000'000'001;
    s.len = 4096;
    s.d = 0;
    s.heads = 12;
    s.kv_heads = 4;  // grouped-query attention
    s.d_k = 64;
    s.d_v = 80;
    s.dtype = io::DataType::float64;
    return s;
}

io::InputSpec spec_with_weights() {
    io::InputSpec s;
    s.path = "x.h5";
    s.mode = io::InputMode::embeddings;
    s.dataset = "/embeddings";
    s.layout = io::QkvLayout::packed;
    s.lengths = "";  // every sequence has L tokens
    s.n = 3;
    s.len = 17;
    s.d = 48;
    s.heads = 3;
    s.d_k = 8;
    s.d_v = 5;
    s.dtype = io::DataType::float32;
    io::WeightsSpec w;
    w.path = "weights.h5";
    w.d_in = 48;
    w.qk_width = 24;
    w.v_width = 15;
    w.has_w_o = true;
    w.d_out = 31;
    w.has_b_q = true;
    w.has_b_k = false;
    w.has_b_v = true;
    w.has_b_o = false;
    w.dtype = io::DataType::float64;
    w.k_width = 8;  // multi-query: one K/V head
    w.file_heads = 3;
    w.file_kv_heads = 1;
    w.file_rope_theta = 500000.0 / 3;  // every bit must survive
    s.kv_heads = 1;
    s.weights = w;
    return s;
}

void expect_same(const io::InputSpec& a, const io::InputSpec& b) {
    EXPECT_EQ(a.path, b.path);
    EXPECT_EQ(a.mode, b.mode);
    EXPECT_EQ(a.dataset, b.dataset);
    EXPECT_EQ(a.query, b.query);
    EXPECT_EQ(a.key, b.key);
    EXPECT_EQ(a.value, b.value);
    EXPECT_EQ(a.layout, b.layout);
    EXPECT_EQ(a.lengths, b.lengths);
    EXPECT_EQ(a.n, b.n);
    EXPECT_EQ(a.len, b.len);
    EXPECT_EQ(a.d, b.d);
    EXPECT_EQ(a.heads, b.heads);
    EXPECT_EQ(a.kv_heads, b.kv_heads);
    EXPECT_EQ(a.d_k, b.d_k);
    EXPECT_EQ(a.d_v, b.d_v);
    EXPECT_EQ(a.dtype, b.dtype);
    ASSERT_EQ(a.weights.has_value(), b.weights.has_value());
    if (!a.weights) return;
    const io::WeightsSpec &x = *a.weights, &y = *b.weights;
    EXPECT_EQ(x.path, y.path);
    EXPECT_EQ(x.d_in, y.d_in);
    EXPECT_EQ(x.qk_width, y.qk_width);
    EXPECT_EQ(x.v_width, y.v_width);
    EXPECT_EQ(x.has_w_o, y.has_w_o);
    EXPECT_EQ(x.d_out, y.d_out);
    EXPECT_EQ(x.has_b_q, y.has_b_q);
    EXPECT_EQ(x.has_b_k, y.has_b_k);
    EXPECT_EQ(x.has_b_v, y.has_b_v);
    EXPECT_EQ(x.has_b_o, y.has_b_o);
    EXPECT_EQ(x.dtype, y.dtype);
    EXPECT_EQ(x.k_width, y.k_width);
    EXPECT_EQ(x.file_heads, y.file_heads);
    EXPECT_EQ(x.file_kv_heads, y.file_kv_heads);
    EXPECT_EQ(x.file_rope_theta, y.file_rope_theta);
}

TEST(SpecCodec, RoundTripWithoutWeights) {
    const io::InputSpec s = spec_without_weights();
    const io::InputSpec back = decode_spec(encode_spec(s));
    expect_same(s, back);
    EXPECT_EQ(encode_spec(back), encode_spec(s));
}

TEST(SpecCodec, RoundTripWithWeights) {
    const io::InputSpec s = spec_with_weights();
    const io::InputSpec back = decode_spec(encode_spec(s));
    expect_same(s, back);
    EXPECT_EQ(back.d_out(), 31);
    EXPECT_EQ(encode_spec(back), encode_spec(s));
}

// .npy shards: every rank maps them itself, from the paths, rows, offsets and byte order
// rank 0 checked.
TEST(SpecCodec, NpyShardsRoundTrip) {
    io::InputSpec s = spec_with_weights();
    s.path = "shards/*.npy";
    s.packed = true;
    s.offsets = "shards/offsets.npy";
    s.tokens = 91;
    s.shards = {io::NpyShard{"shards/part_0.npy", 40, 128, false}, io::NpyShard{"shards/part_10.npy", 51, 192, true}};
    const io::InputSpec back = decode_spec(encode_spec(s));
    expect_same(s, back);
    ASSERT_EQ(back.shards.size(), 2u);
    for (std::size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(back.shards[i].path, s.shards[i].path);
        EXPECT_EQ(back.shards[i].rows, s.shards[i].rows);
        EXPECT_EQ(back.shards[i].data_offset, s.shards[i].data_offset);
        EXPECT_EQ(back.shards[i].big_endian, s.shards[i].big_endian);
    }
    EXPECT_EQ(back.offsets, s.offsets);
    EXPECT_EQ(back.tokens, 91);
    EXPECT_TRUE(decode_spec(encode_spec(spec_with_weights())).shards.empty());
}

TEST(SpecCodec, EveryFlagOfTheWeightsSurvivesAlone) {
    // Each boolean set by itself, so that fields swapped in the codec would show.
    for (int bit = 0; bit < 5; ++bit) {
        io::InputSpec s = spec_with_weights();
        io::WeightsSpec& w = *s.weights;
        w.has_w_o = bit == 0;
        w.has_b_q = bit == 1;
        w.has_b_k = bit == 2;
        w.has_b_v = bit == 3;
        w.has_b_o = bit == 4;
        SCOPED_TRACE("flag " + std::to_string(bit));
        expect_same(s, decode_spec(encode_spec(s)));
    }
}

TEST(SpecCodec, DefaultSpecRoundTrips) {
    const io::InputSpec s;
    expect_same(s, decode_spec(encode_spec(s)));
}

TEST(SpecCodec, TruncatedBytesThrowInvalidArgument) {
    for (const io::InputSpec& s : {spec_without_weights(), spec_with_weights()}) {
        const std::string bytes = encode_spec(s);
        for (std::size_t size = 0; size < bytes.size(); ++size) {
            EXPECT_THROW(decode_spec(bytes.substr(0, size)), std::invalid_argument) << size << " of " << bytes.size() << " bytes";
        }
    }
}

TEST(SpecCodec, TrailingAndDamagedBytesThrowInvalidArgument) {
    const std::string bytes = encode_spec(spec_with_weights());
    EXPECT_THROW(decode_spec(bytes + '\0'), std::invalid_argument);
    // The first field is the path's size: negative, then far beyond the buffer.
    for (const std::int64_t size : {std::int64_t{-1}, std::int64_t{1} << 62, std::int64_t{1000}}) {
        std::string damaged = bytes;
        std::memcpy(damaged.data(), &size, sizeof size);
        EXPECT_THROW(decode_spec(damaged), std::invalid_argument) << "path size " << size;
    }
}

TEST(SpecCodec, BroadcastSpecReachesEveryRank) {
    for (const bool with_weights : {false, true}) {
        for (const int root : {0, 2}) {
            const io::InputSpec expected = with_weights ? spec_with_weights() : spec_without_weights();
            std::vector<io::InputSpec> got(3);
            run_ranks(3, [&](Comm& comm) {
                io::InputSpec mine;  // a stale value elsewhere must be replaced, weights included
                if (comm.rank() == root) mine = expected;
                else mine = with_weights ? spec_without_weights() : spec_with_weights();
                broadcast_spec(comm, mine, root);
                got[static_cast<std::size_t>(comm.rank())] = mine;
            });
            for (int r = 0; r < 3; ++r) {
                SCOPED_TRACE("rank " + std::to_string(r) + ", root " + std::to_string(root));
                expect_same(expected, got[static_cast<std::size_t>(r)]);
            }
        }
    }
}

io::ProjectionWeights some_weights() {
    io::ProjectionWeights w;
    for (int i = 0; i < 12; ++i) w.w_q.push_back(0.5f * static_cast<float>(i));
    for (int i = 0; i < 12; ++i) w.w_k.push_back(-1.0f * static_cast<float>(i));
    for (int i = 0; i < 6; ++i) w.w_v.push_back(3.0f + static_cast<float>(i));
    for (int i = 0; i < 9; ++i) w.w_o.push_back(static_cast<float>(i * i));
    w.b_q = {1.0f, 2.0f, 3.0f, 4.0f};
    w.b_v = {7.0f, 8.0f};  // b_k and b_o absent
    return w;
}

bool same_weights(const io::ProjectionWeights& a, const io::ProjectionWeights& b) {
    return a.w_q == b.w_q && a.w_k == b.w_k && a.w_v == b.w_v && a.w_o == b.w_o && a.b_q == b.b_q && a.b_k == b.b_k &&
           a.b_v == b.b_v && a.b_o == b.b_o;
}

TEST(SpecCodec, BroadcastWeightsReachesEveryRank) {
    for (const bool present : {false, true}) {
        std::vector<std::optional<io::ProjectionWeights>> got(4);
        run_ranks(4, [&](Comm& comm) {
            std::optional<io::ProjectionWeights> mine;
            if (comm.rank() == 1) {
                if (present) mine = some_weights();
            } else if (!present) {
                mine = some_weights();  // stale: must be dropped
            } else {
                mine.emplace();
                mine->b_k = {9.0f};  // stale: must be replaced by the root's (empty) b_k
            }
            broadcast_weights(comm, mine, 1);
            got[static_cast<std::size_t>(comm.rank())] = mine;
        });
        for (int r = 0; r < 4; ++r) {
            SCOPED_TRACE("rank " + std::to_string(r) + (present ? ", weights" : ", no weights"));
            ASSERT_EQ(got[static_cast<std::size_t>(r)].has_value(), present);
            if (present) {
                EXPECT_TRUE(same_weights(*got[static_cast<std::size_t>(r)], some_weights()));
            }
        }
    }
}

}  // namespace
}  // namespace attnbatch::distributed
