#include "attnbatch/distributed/spec_codec.hpp"

#include <cstring>
#include <string>
#include <stdexcept>

namespace attnbatch::distributed {

namespace {

class Writer {
public:
    void integer(std::int64_t value) { bytes_.append(reinterpret_cast<const char*>(&value), sizeof value); }
    void text(const std::string& value) {
        integer(static_cast<std::int64_t>(value.size()));
        bytes_ += value;
    }
    std::string take() { return std::move(bytes_); }

private:
    std::string bytes_;
};

class Reader {
public:
    explicit Reader(const std::string& bytes) : bytes_(bytes) {}
    std::int64_t integer() {
        std::int64_t value = 0;
        need(sizeof value);
        std::memcpy(&value, bytes_.data() + at_, sizeof value);
        at_ += sizeof value;
        return value;
    }
    std::string text() {
        const std::int64_t size = integer();
        if (size < 0) throw std::invalid_argument("decode_spec: negative string size");
        need(static_cast<std::size_t>(size));
        std::string value = bytes_.substr(at_, static_cast<std::size_t>(size));
        at_ += static_cast<std::size_t>(size);
        return value;
    }
    bool done() const { return at_ == bytes_.size(); }

private:
    void need(std::size_t count) const {
        if (bytes_.size() - at_ < count) throw std::invalid_argument("decode_spec: truncated");
    }
    const std::string& bytes_;
    std::size_t at_ = 0;
};

}  // namespace

std::string encode_spec(const io::InputSpec& spec) {
    Writer w;
    w.text(spec.path);
    w.integer(static_cast<std::int64_t>(spec.mode));
    w.text(spec.dataset);
    w.text(spec.query);
    w.text(spec.key);
    w.text(spec.value);
    w.integer(static_cast<std::int64_t>(spec.layout));
    w.text(spec.lengths);
    for (std::int64_t v : {spec.n, spec.len, spec.d, spec.heads, spec.d_k, spec.d_v}) w.integer(v);
    w.integer(static_cast<std::int64_t>(spec.dtype));
    w.integer(spec.weights ? 1 : 0);
    if (spec.weights) {
        const io::WeightsSpec& ws = *spec.weights;
        w.text(ws.path);
        for (std::int64_t v : {ws.d_in, ws.qk_width, ws.v_width, std::int64_t{ws.has_w_o}, ws.d_out, std::int64_t{ws.has_b_q},
                               std::int64_t{ws.has_b_k}, std::int64_t{ws.has_b_v}, std::int64_t{ws.has_b_o}}) {
            w.integer(v);
        }
        w.integer(static_cast<std::int64_t>(ws.dtype));
        w.integer(ws.k_width);
        w.integer(ws.file_heads);
        w.integer(ws.file_kv_heads);
        std::int64_t theta_bits = 0;
        std::memcpy(&theta_bits, &ws.file_rope_theta, sizeof theta_bits);
        w.integer(theta_bits);
    }
    w.integer(spec.kv_heads);
    w.integer(spec.first_sequence);
    w.integer(spec.packed ? 1 : 0);
    w.text(spec.offsets);
    w.integer(spec.tokens);
    w.integer(static_cast<std::int64_t>(spec.shards.size()));
    for (const io::NpyShard& shard : spec.shards) {
        w.text(shard.path);
        w.integer(shard.rows);
        w.integer(shard.data_offset);
        w.integer(shard.big_endian ? 1 : 0);
    }
    return w.take();
}

io::InputSpec decode_spec(const std::string& bytes) {
    Reader r(bytes);
    io::InputSpec spec;
    spec.path = r.text();
    spec.mode = static_cast<io::InputMode>(r.integer());
    spec.dataset = r.text();
    spec.query = r.text();
    spec.key = r.text();
    spec.value = r.text();
    spec.layout = static_cast<io::QkvLayout>(r.integer());
    spec.lengths = r.text();
    for (std::int64_t* v : {&spec.n, &spec.len, &spec.d, &spec.heads, &spec.d_k, &spec.d_v}) *v = r.integer();
    spec.dtype = static_cast<io::DataType>(r.integer());
    if (r.integer() != 0) {
        io::WeightsSpec ws;
        ws.path = r.text();
        ws.d_in = r.integer();
        ws.qk_width = r.integer();
        ws.v_width = r.integer();
        ws.has_w_o = r.integer() != 0;
        ws.d_out = r.integer();
        ws.has_b_q = r.integer() != 0;
        ws.has_b_k = r.integer() != 0;
        ws.has_b_v = r.integer() != 0;
        ws.has_b_o = r.integer() != 0;
        ws.dtype = static_cast<io::DataType>(r.integer());
        ws.k_width = r.integer();
        ws.file_heads = r.integer();
        ws.file_kv_heads = r.integer();
        const std::int64_t theta_bits = r.integer();
        std::memcpy(&ws.file_rope_theta, &theta_bits, sizeof theta_bits);
        spec.weights = ws;
    }
    spec.kv_heads = r.integer();
    spec.first_sequence = r.integer();
    spec.packed = r.integer() != 0;
    spec.offsets = r.text();
    spec.tokens = r.integer();
    const std::int64_t shards = r.integer();
    if (shards < 0) throw std::invalid_argument("decode_spec: negative shard count");
    for (std::int64_t i = 0; i < shards; ++i) {
        io::NpyShard shard;
        shard.path = r.text();
        shard.rows = r.integer();
        shard.data_offset = r.integer();
        shard.big_endian = r.integer() != 0;
        spec.shards.push_back(std::move(shard));
    }
    if (!r.done()) throw std::invalid_argument("decode_spec: trailing bytes");
    return spec;
}

void broadcast_spec(Comm& comm, io::InputSpec& spec, int root) {
    if (comm.size() == 1) return;
    std::string bytes = comm.rank() == root ? encode_spec(spec) : std::string();
    broadcast_string(comm, bytes, root);
    if (comm.rank() != root) spec = decode_spec(bytes);
}

void broadcast_weights(Comm& comm, std::optional<io::ProjectionWeights>& weights, int root) {
    if (comm.size() == 1) return;
    std::int64_t present = weights ? 1 : 0;
    comm.broadcast(&present, sizeof present, root);
    if (!present) {
        weights.reset();
        return;
    }
    if (!weights) weights.emplace();
    for (std::vector<float>* v : {&weights->w_q, &weights->w_k, &weights->w_v, &weights->w_o, &weights->b_q, &weights->b_k,
                                  &weights->b_v, &weights->b_o}) {
        broadcast_vector(comm, *v, root);
    }
}

}  // namespace attnbatch::distributed
