// --io gather: rank 0 is the only rank that touches files. Each round it reads and sends
// every other rank's step, then receives and writes their results. Every message is
// preceded by a one-word header saying whether the data follows, so that a read failure on
// rank 0 is reported to the rank waiting for that data instead of leaving it blocked.
#include <algorithm>

#include "attnbatch/distributed/step_io.hpp"
#include "wall_clock.hpp"

namespace attnbatch::distributed {

namespace {

enum Tag : int { tag_input_header = 11, tag_input = 12, tag_output_header = 13, tag_output = 14 };

std::size_t per_sequence(const io::InputSpec& spec, std::int64_t width) {
    return static_cast<std::size_t>(spec.len * width);
}

// The float arrays of an input block, sized for `count` sequences.
std::vector<std::vector<float>*> input_arrays(const io::InputSpec& spec, io::InputBlock& block, std::int64_t count) {
    const std::size_t n = static_cast<std::size_t>(count);
    if (spec.mode == io::InputMode::embeddings) {
        block.x.resize(n * per_sequence(spec, spec.d));
        return {&block.x};
    }
    block.q.resize(n * per_sequence(spec, spec.heads * spec.d_k));
    block.k.resize(n * per_sequence(spec, spec.heads * spec.d_k));
    block.v.resize(n * per_sequence(spec, spec.heads * spec.d_v));
    return {&block.q, &block.k, &block.v};
}

// Elements of each array of a step's results, as rank 0 writes them.
struct OutputCounts {
    std::size_t output = 0, lse = 0, lengths = 0, attention = 0;
    bool f16 = false;
};

OutputCounts output_counts(const io::InputSpec& spec, const io::OutputLayout& layout, const RankStep& step) {
    if (step.piece() || layout.packed) {  // variable rows per sequence
        const io::SpanSizes sizes = io::span_sizes(layout, span_of(step));
        return OutputCounts{sizes.output, sizes.lse, sizes.lengths, sizes.attention,
                            layout.weights_dtype == io::WeightsDtype::f16};
    }
    const std::size_t count = static_cast<std::size_t>(step.last - step.first), len = static_cast<std::size_t>(spec.len);
    const auto [wa, wb] = layout.weights_range(step.first, step.last);
    const std::size_t maps = layout.save_weights == io::SaveWeights::none ? 0 : static_cast<std::size_t>(wb - wa);
    OutputCounts c;
    c.output = count * len * static_cast<std::size_t>(layout.d_out);
    c.lse = count * static_cast<std::size_t>(layout.heads) * len;
    c.lengths = count;
    c.attention = maps * static_cast<std::size_t>(layout.weights_heads()) * len * len;
    c.f16 = layout.weights_dtype == io::WeightsDtype::f16;
    return c;
}

// Owned copies of a step's results, on rank 0, for the ranks it writes for.
struct ReceivedOutput {
    std::vector<float> output, lse, attention_f32;
    std::vector<std::uint16_t> attention_f16;
    std::vector<std::int32_t> lengths;

    void size_for(const OutputCounts& c) {
        output.resize(c.output);
        lse.resize(c.lse);
        lengths.resize(c.lengths);
        attention_f16.resize(c.f16 ? c.attention : 0);
        attention_f32.resize(c.f16 ? 0 : c.attention);
    }
    io::OutputBlock view() const {
        io::OutputBlock block;
        block.output = output.data();
        block.lse = lse.data();
        block.lengths = lengths.data();
        block.attention_f32 = attention_f32.empty() ? nullptr : attention_f32.data();
        block.attention_f16 = attention_f16.empty() ? nullptr : attention_f16.data();
        return block;
    }
};

class GatherIo final : public StepIo {
public:
    GatherIo(Comm& comm, const io::InputSpec& spec, const io::OutputLayout& layout, std::unique_ptr<io::InputReader> reader,
             std::unique_ptr<io::OutputFile> output)
        : comm_(comm), spec_(spec), layout_(layout), reader_(std::move(reader)), output_(std::move(output)) {}

    void fetch(const Round& round, io::InputBlock& block, IoTimes& times, LocalFailure& failure) override {
        const RankStep& mine = round[static_cast<std::size_t>(comm_.rank())];
        if (comm_.is_root()) {
            for (int r = 1; r < comm_.size(); ++r) {
                const RankStep& step = round[static_cast<std::size_t>(r)];
                if (step.empty()) continue;
                std::int64_t ok = read_into(step, transit_, times, failure) ? 1 : 0;
                const double t0 = wall_seconds();
                comm_.send(&ok, sizeof ok, r, tag_input_header);
                if (ok && rows_vary(step)) send_sized_input(transit_, r);
                else if (ok) send_input(transit_, r);
                times.communicate += wall_seconds() - t0;
            }
            if (!mine.empty()) read_into(mine, block, times, failure);
            else clear(block);
            return;
        }
        if (mine.empty()) {
            clear(block);
            return;
        }
        const double t0 = wall_seconds();
        std::int64_t ok = 0;
        comm_.recv(&ok, sizeof ok, 0, tag_input_header);
        if (ok && rows_vary(mine)) {
            recv_sized_input(mine, block);
        } else if (ok) {
            block.first = mine.first;
            block.count = mine.last - mine.first;
            block.row_first = block.row_last = block.key_rows = 0;
            block.offsets.clear();
            block.lengths.resize(static_cast<std::size_t>(block.count));
            recv_vector(comm_, block.lengths, 0, tag_input);
            for (std::vector<float>* array : input_arrays(spec_, block, block.count)) recv_vector(comm_, *array, 0, tag_input);
        } else {
            failure.set(exit_io, "rank 0 could not read sequences [" + std::to_string(mine.first) + ", " +
                                         std::to_string(mine.last) + ") for rank " + std::to_string(comm_.rank()));
            clear(block);
        }
        times.communicate += wall_seconds() - t0;
    }

    void store(const Round& round, const io::OutputBlock* block, IoTimes& times, LocalFailure& failure) override {
        const RankStep& mine = round[static_cast<std::size_t>(comm_.rank())];
        if (!comm_.is_root()) {
            if (mine.empty()) return;
            const double t0 = wall_seconds();
            std::int64_t ok = block ? 1 : 0;
            comm_.send(&ok, sizeof ok, 0, tag_output_header);
            if (ok) send_output(*block, mine);
            times.communicate += wall_seconds() - t0;
            return;
        }
        if (!mine.empty() && block) write(mine, *block, times, failure);
        for (int r = 1; r < comm_.size(); ++r) {
            const RankStep& step = round[static_cast<std::size_t>(r)];
            if (step.empty()) continue;
            const double t0 = wall_seconds();
            std::int64_t ok = 0;
            comm_.recv(&ok, sizeof ok, r, tag_output_header);
            if (ok) {
                received_.size_for(output_counts(spec_, layout_, step));
                recv_vector(comm_, received_.output, r, tag_output);
                recv_vector(comm_, received_.lse, r, tag_output);
                recv_vector(comm_, received_.lengths, r, tag_output);
                recv_vector(comm_, received_.attention_f32, r, tag_output);
                recv_vector(comm_, received_.attention_f16, r, tag_output);
            }
            times.communicate += wall_seconds() - t0;
            if (ok) write(step, received_.view(), times, failure);
        }
        const double t0 = wall_seconds();
        record_failure(failure, [&] { output_->checkpoint(); });
        times.write += wall_seconds() - t0;
    }

    void finish(IoTimes& times) override {
        if (!comm_.is_root()) return;
        const double t0 = wall_seconds();
        output_->close_complete();
        times.direct_bytes = static_cast<double>(output_->direct_bytes());
        const double t1 = wall_seconds();
        io::publish_output(output_->path(), output_->force(), output_->fsync());
        const double t2 = wall_seconds();
        times.close += t1 - t0;
        times.publish += t2 - t1;
        times.write += t2 - t0;
    }

    void abandon() override {
        if (!comm_.is_root()) return;
        try {
            output_->close_incomplete();
        } catch (const std::exception&) {
            // The run fails anyway with the agreed error; the .partial stays for --resume.
        }
    }

    // Rank 0 writes every rank's rows; its own compute shares its core with those writes.
    void watch_compute(const std::atomic<bool>* computing) override {
        if (output_) output_->watch_compute(computing);
    }

private:
    static void clear(io::InputBlock& block) {
        block.count = 0;
        block.lengths.clear();
        block.row_first = block.row_last = block.key_rows = 0;
        block.offsets.clear();
    }

    bool read_into(const RankStep& step, io::InputBlock& block, IoTimes& times, LocalFailure& failure) {
        if (failure) return false;  // this round fails anyway: do not read more
        const double t0 = wall_seconds();
        record_failure(failure, [&] { read_step(*reader_, step, block); });
        times.read += wall_seconds() - t0;
        return !failure;
    }

    void send_input(io::InputBlock& block, int rank) {
        block.copy_in_place();  // what travels is the vectors
        send_vector(comm_, block.lengths, rank, tag_input);
        for (std::vector<float>* array : input_arrays(spec_, block, block.count)) send_vector(comm_, *array, rank, tag_input);
    }

    // Pieces and the packed layout: how many rows a block holds is not the same for every
    // sequence, so the sizes travel ahead of the data.
    bool rows_vary(const RankStep& step) const { return step.piece() || spec_.packed; }

    void send_sized_input(io::InputBlock& block, int rank) {
        block.copy_in_place();  // what travels is the vectors
        std::int64_t header[10] = {block.count,
                                   block.row_first,
                                   block.row_last,
                                   block.key_rows,
                                   static_cast<std::int64_t>(block.x.size()),
                                   static_cast<std::int64_t>(block.q.size()),
                                   static_cast<std::int64_t>(block.k.size()),
                                   static_cast<std::int64_t>(block.v.size()),
                                   static_cast<std::int64_t>(block.offsets.size()),
                                   static_cast<std::int64_t>(block.lengths.size())};
        comm_.send(header, sizeof header, rank, tag_input);
        for (const std::vector<float>* array : {&block.x, &block.q, &block.k, &block.v}) send_vector(comm_, *array, rank, tag_input);
        send_vector(comm_, block.offsets, rank, tag_input);
        send_vector(comm_, block.lengths, rank, tag_input);
    }

    void recv_sized_input(const RankStep& step, io::InputBlock& block) {
        std::int64_t header[10] = {};
        comm_.recv(header, sizeof header, 0, tag_input);
        block.first = step.first;
        block.count = header[0];
        block.row_first = header[1];
        block.row_last = header[2];
        block.key_rows = header[3];
        const auto size = [](std::int64_t v) { return static_cast<std::size_t>(v); };
        block.x.resize(size(header[4]));
        block.q.resize(size(header[5]));
        block.k.resize(size(header[6]));
        block.v.resize(size(header[7]));
        block.offsets.resize(size(header[8]));
        block.lengths.resize(size(header[9]));
        for (std::vector<float>* array : {&block.x, &block.q, &block.k, &block.v}) recv_vector(comm_, *array, 0, tag_input);
        recv_vector(comm_, block.offsets, 0, tag_input);
        recv_vector(comm_, block.lengths, 0, tag_input);
    }

    void send_output(const io::OutputBlock& block, const RankStep& step) {
        // In the order, and with the sizes, rank 0 receives them.
        const OutputCounts c = output_counts(spec_, layout_, step);
        const auto send = [&](const void* data, std::size_t bytes) {
            if (bytes > 0) comm_.send(data, bytes, 0, tag_output);
        };
        send(block.output, c.output * sizeof(float));
        send(block.lse, c.lse * sizeof(float));
        send(block.lengths, c.lengths * sizeof(std::int32_t));
        if (c.f16) send(block.attention_f16, c.attention * sizeof(std::uint16_t));
        else send(block.attention_f32, c.attention * sizeof(float));
    }

    void write(const RankStep& step, const io::OutputBlock& block, IoTimes& times, LocalFailure& failure) {
        if (failure) return;
        const double t0 = wall_seconds();
        record_failure(failure, [&] { output_->write_span(span_of(step), block); });
        times.write += wall_seconds() - t0;
    }

    Comm& comm_;
    const io::InputSpec& spec_;
    const io::OutputLayout& layout_;
    std::unique_ptr<io::InputReader> reader_;
    std::unique_ptr<io::OutputFile> output_;
    io::InputBlock transit_;
    ReceivedOutput received_;
};

}  // namespace

std::unique_ptr<StepIo> make_gather_io(Comm& comm, const io::InputSpec& spec, const io::OutputLayout& layout,
                                       std::unique_ptr<io::InputReader> reader, std::unique_ptr<io::OutputFile> output) {
    return std::make_unique<GatherIo>(comm, spec, layout, std::move(reader), std::move(output));
}

}  // namespace attnbatch::distributed
