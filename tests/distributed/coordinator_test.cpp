// The coordinator on P threads: the ThreadComm double itself, agree(), and run_rounds with an
// in-memory StepIo (no HDF5, no MPI), whose results must not depend on the number of ranks
// or the schedule, and whose failures must end every rank the same way.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "attnbatch/distributed/comm.hpp"
#include "attnbatch/distributed/coordinator.hpp"
#include "attnbatch/distributed/plan.hpp"
#include "attnbatch/distributed/schedule.hpp"
#include "attnbatch/distributed/step_io.hpp"
#include "attnbatch/io/h5/h5.hpp"
#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/io/models/weights_reader.hpp"
#include "attnbatch/io/output/output_file.hpp"
#include "support/kernel_test_support.hpp"
#include "support/temp_dir.hpp"
#include "support/thread_comm.hpp"

namespace attnbatch::distributed {
namespace {

using attnbatch::test::bit_identical;
using testing::CommAborted;
using testing::CommError;
using testing::run_ranks;
using testing::TempDir;
using testing::ThreadCommOptions;

// ---------------------------------------------------------------- the test double

TEST(ThreadComm, BroadcastFromEveryRoot) {
    run_ranks(4, [](Comm& comm) {
        EXPECT_EQ(comm.size(), 4);
        for (int root = 0; root < 4; ++root) {
            std::vector<std::int32_t> values(5, comm.rank() == root ? 0 : -1);
            if (comm.rank() == root) {
                for (int i = 0; i < 5; ++i) values[static_cast<std::size_t>(i)] = 100 * root + i;
            }
            comm.broadcast(values.data(), values.size() * sizeof values[0], root);
            for (int i = 0; i < 5; ++i) EXPECT_EQ(values[static_cast<std::size_t>(i)], 100 * root + i);
            std::vector<double> sized = comm.rank() == root ? std::vector<double>{1.5, 2.5, 3.5} : std::vector<double>{};
            broadcast_vector(comm, sized, root);
            EXPECT_EQ(sized, (std::vector<double>{1.5, 2.5, 3.5}));
        }
        comm.barrier();
    });
}

TEST(ThreadComm, ReductionsAndAllGatherInRankOrder) {
    run_ranks(5, [](Comm& comm) {
        const int r = comm.rank();
        EXPECT_EQ(comm.max(std::int64_t{10} * ((r * 3) % 5) - 7), 33);
        EXPECT_EQ(comm.max(-0.5 * r), 0.0);
        EXPECT_EQ(comm.sum(static_cast<double>(r + 1)), 15.0);
        const std::vector<double> all = comm.all_gather({static_cast<double>(r), 10.0 + r});
        ASSERT_EQ(all.size(), 10u);
        for (int q = 0; q < 5; ++q) {
            EXPECT_EQ(all[static_cast<std::size_t>(2 * q)], q);
            EXPECT_EQ(all[static_cast<std::size_t>(2 * q + 1)], 10.0 + q);
        }
        EXPECT_TRUE(comm.all_gather({}).empty());
    });
}

TEST(ThreadComm, ReceivesMatchSourceAndTagInOrder) {
    run_ranks(3, [](Comm& comm) {
        const auto send_int = [&](std::int64_t v, int to, int tag) { comm.send(&v, sizeof v, to, tag); };
        const auto recv_int = [&](int from, int tag) {
            std::int64_t v = -1;
            comm.recv(&v, sizeof v, from, tag);
            return v;
        };
        if (comm.rank() == 1) {
            send_int(10, 0, 5);
            send_int(11, 0, 5);
            send_int(12, 0, 6);
        } else if (comm.rank() == 2) {
            send_int(20, 0, 5);
            send_int(21, 0, 7);
        } else {
            // Asked in another order than sent: each (source, tag) pair is its own FIFO.
            EXPECT_EQ(recv_int(2, 7), 21);
            EXPECT_EQ(recv_int(1, 6), 12);
            EXPECT_EQ(recv_int(2, 5), 20);
            EXPECT_EQ(recv_int(1, 5), 10);
            EXPECT_EQ(recv_int(1, 5), 11);
        }
        comm.barrier();
    });
}

TEST(ThreadComm, MismatchedCollectivesAreReported) {
    EXPECT_THROW(run_ranks(2,
                           [](Comm& comm) {
                               if (comm.rank() == 0) comm.barrier();
                               else comm.max(std::int64_t{1});
                           }),
                 CommError);
    EXPECT_THROW(run_ranks(3,
                           [](Comm& comm) {
                               std::int64_t v = 0;
                               comm.broadcast(&v, sizeof v, comm.rank() == 2 ? 1 : 0);
                           }),
                 CommError);
}

TEST(ThreadComm, ARankLeavingEarlyIsReportedNotAHang) {
    EXPECT_THROW(run_ranks(3,
                           [](Comm& comm) {
                               if (comm.rank() != 1) comm.barrier();
                           }),
                 CommError);
    EXPECT_THROW(run_ranks(2,
                           [](Comm& comm) {
                               std::int64_t v = 0;
                               if (comm.rank() == 0) comm.recv(&v, sizeof v, 1, 3);
                           }),
                 CommError);
}

TEST(ThreadComm, AReceiveOfTheWrongSizeIsReported) {
    EXPECT_THROW(run_ranks(2,
                           [](Comm& comm) {
                               std::int64_t v[2] = {1, 2};
                               if (comm.rank() == 0) comm.send(v, sizeof v, 1, 1);
                               else comm.recv(v, sizeof v[0], 0, 1);
                           }),
                 CommError);
}

TEST(ThreadComm, AbortEndsEveryRankWithTheCode) {
    std::atomic<int> released{0};
    try {
        run_ranks(3, [&](Comm& comm) {
            if (comm.rank() == 2) comm.abort(7);
            try {
                comm.barrier();
            } catch (const CommAborted& e) {
                EXPECT_TRUE(e.secondary());
                EXPECT_EQ(e.code(), 7);
                ++released;
                throw;
            }
        });
        FAIL() << "run_ranks returned";
    } catch (const CommAborted& e) {
        EXPECT_FALSE(e.secondary());
        EXPECT_EQ(e.rank(), 2);
        EXPECT_EQ(e.code(), 7);
    }
    EXPECT_EQ(released.load(), 2);
}

TEST(ThreadComm, SynchronousSendsCatchASendSendDeadlock) {
    ThreadCommOptions options;
    options.synchronous_sends = true;
    options.deadlock_seconds = 0.3;
    const auto exchange = [](Comm& comm) {
        const int other = 1 - comm.rank();
        std::int64_t out = comm.rank(), in = -1;
        comm.send(&out, sizeof out, other, 1);
        comm.recv(&in, sizeof in, other, 1);
        EXPECT_EQ(in, other);
    };
    EXPECT_NO_THROW(run_ranks(2, exchange));  // buffered: fine
    EXPECT_THROW(run_ranks(2, exchange, options), CommError);
}

TEST(ThreadComm, ABodyFailureReleasesTheOtherRanksAndIsRethrown) {
    EXPECT_THROW(run_ranks(4,
                           [](Comm& comm) {
                               if (comm.rank() == 3) throw std::logic_error("rank 3 broke");
                               comm.barrier();
                           }),
                 std::logic_error);
}

// ---------------------------------------------------------------- agree()

TEST(Agree, EveryRankGetsTheLowestFailingRanksOutcome) {
    struct Case {
        int ranks;
        std::vector<int> failing;
    };
    const std::vector<Case> cases = {{1, {}}, {1, {0}}, {4, {}}, {4, {2}}, {4, {1, 3}}, {4, {0, 3}},
                                     {5, {4}}, {5, {1, 2, 3, 4}}, {3, {0, 1, 2}}};
    for (const Case& c : cases) {
        std::string label = std::to_string(c.ranks) + " ranks, failing {";
        for (int f : c.failing) label += " " + std::to_string(f);
        SCOPED_TRACE(label + " }");
        std::vector<AgreedError> got(static_cast<std::size_t>(c.ranks));
        run_ranks(c.ranks, [&](Comm& comm) {
            const bool fails = std::find(c.failing.begin(), c.failing.end(), comm.rank()) != c.failing.end();
            const int code = fails ? 10 + comm.rank() : 0;
            const std::string message = fails ? "rank " + std::to_string(comm.rank()) + " failed: " + std::string(
                                                    static_cast<std::size_t>(100 * comm.rank()), 'x')
                                              : "fine";
            got[static_cast<std::size_t>(comm.rank())] = agree(comm, code, message);
            comm.barrier();  // still in step afterwards
        });
        for (int r = 0; r < c.ranks; ++r) {
            const AgreedError& a = got[static_cast<std::size_t>(r)];
            if (c.failing.empty()) {
                EXPECT_EQ(a.code, 0) << "rank " << r;
                EXPECT_EQ(a.message, "") << "rank " << r;
            } else {
                const int lowest = *std::min_element(c.failing.begin(), c.failing.end());
                EXPECT_EQ(a.code, 10 + lowest) << "rank " << r;
                EXPECT_EQ(a.message, "rank " + std::to_string(lowest) + " failed: " +
                                         std::string(static_cast<std::size_t>(100 * lowest), 'x'))
                    << "rank " << r;
            }
        }
    }
}

TEST(Agree, SerialCommReturnsItsOwnOutcome) {
    auto comm = make_serial_comm();
    EXPECT_EQ(agree(*comm, 0, "x").code, 0);
    const AgreedError a = agree(*comm, 4, "cannot read");
    EXPECT_EQ(a.code, 4);
    EXPECT_EQ(a.message, "cannot read");
    EXPECT_THROW(agree_or_throw(*comm, 3, "bad"), AgreedFailure);
    EXPECT_NO_THROW(agree_or_throw(*comm, 0, ""));
}

// ---------------------------------------------------------------- run_rounds

constexpr std::int64_t kLen = 6, kWidth = 8, kHeads = 2, kHeadWidth = kWidth / kHeads;
constexpr std::int64_t kMaxSequences = 3;
constexpr int kMinRounds = 8;

enum class Schedule { static_contiguous, dynamic };

const char* name_of(Schedule s) { return s == Schedule::dynamic ? "dynamic" : "static"; }

struct Problem {
    io::InputSpec spec;
    io::OutputLayout layout;
    std::optional<io::ProjectionWeights> weights;  // none: embeddings attend to themselves
    AttentionSettings settings;
    std::vector<float> x;               // (N, L, d)
    std::vector<std::int32_t> lengths;  // (N), ragged, zeros included
    std::vector<Unit> units;
};

enum class Saved { none, all, some };

Problem make_problem(std::int64_t n, Saved saved, bool causal) {
    Problem p;
    io::InputSpec& s = p.spec;
    s.path = "in-memory.h5";
    s.mode = io::InputMode::embeddings;
    s.dataset = "/embeddings";
    s.lengths = "/lengths";
    s.n = n;
    s.len = kLen;
    s.d = kWidth;
    s.heads = kHeads;
    s.d_k = kHeadWidth;
    s.d_v = kHeadWidth;
    p.layout = io::output_layout_for(s);
    p.layout.save_weights = saved == Saved::none ? io::SaveWeights::none : io::SaveWeights::all;
    if (saved == Saved::some && n > 4) {
        p.layout.weights_first = 2;  // the steps cut across the stored range
        p.layout.weights_last = n - 2;
    }
    p.settings.spec.causal = causal;
    p.settings.spec = p.settings.spec.resolved(kHeadWidth);
    p.settings.kernel.threads = 1;

    std::mt19937_64 rng(static_cast<std::uint64_t>(1000 + n));
    p.x.resize(static_cast<std::size_t>(n * kLen * kWidth));
    for (float& v : p.x) v = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1.0p-53 * 2.0 - 1.0);
    p.lengths.resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
        // Zeros, full lengths and everything between; sequence 1 is always empty.
        p.lengths[static_cast<std::size_t>(i)] = i == 1 ? 0 : static_cast<std::int32_t>(rng() % (kLen + 1));
    }
    CostModel model;
    model.heads = kHeads;
    model.d_k = model.d_v = kHeadWidth;
    model.causal = causal;
    p.units = form_units(p.lengths, model, kMaxSequences);
    return p;
}

// What the fake output holds, shared by every rank.
struct Sink {
    explicit Sink(const Problem& p)
        : output(static_cast<std::size_t>(p.spec.n * kLen * p.layout.d_out), -7.0f),
          lse(static_cast<std::size_t>(p.spec.n * kHeads * kLen), -7.0f),
          attention(static_cast<std::size_t>(p.layout.weights_count() * p.layout.weights_heads() * kLen * kLen), -7.0f),
          lengths(static_cast<std::size_t>(p.spec.n), -1), stored(static_cast<std::size_t>(p.spec.n), 0) {}
    std::mutex mutex;
    std::vector<float> output, lse, attention;
    std::vector<std::int32_t> lengths;
    std::vector<int> stored;
};

// Where a fake StepIo fails: its `call`-th fetch (or store), counting from 0. With
// `bad_length` the fetch succeeds but hands the compute a length beyond L, which the kernel
// rejects on the compute thread.
struct InjectedFailure {
    int rank = -1;
    bool in_store = false;
    int call = 0;
    int code = 0;
    std::string message;
    bool bad_length = false;
};

class MemoryIo final : public StepIo {
public:
    MemoryIo(const Problem& p, Sink& sink, int rank, std::vector<InjectedFailure> failures,
             std::chrono::milliseconds store_delay = std::chrono::milliseconds(0))
        : p_(p), sink_(sink), rank_(rank), failures_(std::move(failures)), store_delay_(store_delay) {}

    void fetch(const Round& round, io::InputBlock& block, IoTimes&, LocalFailure& failure) override {
        fetched.push_back(round);
        const int call = fetches_++;
        inject(false, call, failure);
        const RankStep& step = round.at(static_cast<std::size_t>(rank_));
        block.first = step.first;
        block.count = 0;
        block.lengths.clear();
        if (step.empty() || failure) return;
        const std::size_t per = static_cast<std::size_t>(kLen * kWidth);
        block.count = step.last - step.first;
        block.x.assign(p_.x.begin() + static_cast<std::ptrdiff_t>(step.first * per),
                       p_.x.begin() + static_cast<std::ptrdiff_t>(step.last * per));
        block.lengths.assign(p_.lengths.begin() + step.first, p_.lengths.begin() + step.last);
        for (const InjectedFailure& f : failures_) {
            if (f.bad_length && f.rank == rank_ && f.call == call) block.lengths[0] = static_cast<std::int32_t>(kLen + 5);
        }
    }

    void store(const Round& round, const io::OutputBlock* block, IoTimes&, LocalFailure& failure) override {
        stored_rounds.push_back(round);
        // The coordinator's flag is watched during every store, and is cleared once the step
        // computing beside it ends (however it ends): waited for here, so a flag left set fails.
        if (computing_ != nullptr) {
            ++watched_stores;
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
            while (computing_->load() && std::chrono::steady_clock::now() < deadline) {
                std::this_thread::sleep_for(std::chrono::microseconds(100));
            }
            EXPECT_FALSE(computing_->load()) << "rank " << rank_ << ": the compute flag still set 30 s into a store";
        }
        inject(true, stores_++, failure);
        std::this_thread::sleep_for(store_delay_);  // a slow disk, on this rank only
        const RankStep& step = round.at(static_cast<std::size_t>(rank_));
        if (step.empty()) {
            EXPECT_EQ(block, nullptr) << "rank " << rank_ << ": results for an empty step";
            return;
        }
        if (!block || failure) return;
        const std::size_t first = static_cast<std::size_t>(step.first), count = static_cast<std::size_t>(step.last - step.first);
        const std::size_t out_row = static_cast<std::size_t>(kLen * p_.layout.d_out), lse_row = static_cast<std::size_t>(kHeads * kLen);
        const auto [wa, wb] = p_.layout.weights_range(step.first, step.last);
        const std::size_t map = static_cast<std::size_t>(p_.layout.weights_heads() * kLen * kLen);
        std::lock_guard<std::mutex> lock(sink_.mutex);
        std::memcpy(sink_.output.data() + first * out_row, block->output, count * out_row * sizeof(float));
        std::memcpy(sink_.lse.data() + first * lse_row, block->lse, count * lse_row * sizeof(float));
        std::memcpy(sink_.lengths.data() + first, block->lengths, count * sizeof(std::int32_t));
        if (wb > wa) {
            EXPECT_NE(block->attention_f32, nullptr);
            EXPECT_EQ(block->attention_f16, nullptr);
            if (block->attention_f32) {
                std::memcpy(sink_.attention.data() + static_cast<std::size_t>(wa - p_.layout.weights_first) * map,
                            block->attention_f32, static_cast<std::size_t>(wb - wa) * map * sizeof(float));
            }
        }
        for (std::size_t s = first; s < first + count; ++s) ++sink_.stored[s];
    }

    void finish(IoTimes&) override { ++finished; }
    void abandon() override { ++abandoned; }
    void watch_compute(const std::atomic<bool>* computing) override { computing_ = computing; }
    bool watched() const { return computing_ != nullptr; }

    std::vector<Round> fetched, stored_rounds;
    int finished = 0, abandoned = 0;
    std::size_t watched_stores = 0;

private:
    void inject(bool in_store, int call, LocalFailure& failure) {
        for (const InjectedFailure& f : failures_) {
            if (!f.bad_length && f.rank == rank_ && f.in_store == in_store && f.call == call) failure.set(f.code, f.message);
        }
    }

    const Problem& p_;
    Sink& sink_;
    int rank_;
    std::vector<InjectedFailure> failures_;
    std::chrono::milliseconds store_delay_;
    int fetches_ = 0, stores_ = 0;
    const std::atomic<bool>* computing_ = nullptr;
};

std::unique_ptr<Scheduler> make_scheduler(Schedule schedule, const std::vector<Unit>& units, int ranks) {
    if (schedule == Schedule::dynamic) return make_dynamic_scheduler(units, ranks, kMaxSequences, kMinRounds);
    const Plan plan = plan_static(units, ranks, StaticStrategy::contiguous);
    return make_static_scheduler(static_rounds(units, plan, kMaxSequences, kMinRounds));
}

bool same_rounds(const std::vector<Round>& a, const std::vector<Round>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t k = 0; k < a.size(); ++k) {
        if (a[k].size() != b[k].size()) return false;
        for (std::size_t r = 0; r < a[k].size(); ++r) {
            if (a[k][r].first_unit != b[k][r].first_unit || a[k][r].unit_count != b[k][r].unit_count) return false;
        }
    }
    return true;
}

struct RunOutcome {
    std::vector<RunResult> results;                // per rank (successful runs)
    std::vector<std::optional<AgreedFailure>> failures;  // per rank
    std::vector<int> finished, abandoned;
};

// slow_rank: that rank's every store takes kSlowStoreMilliseconds more.
constexpr int kSlowStoreMilliseconds = 40;
RunOutcome run_on_threads(const Problem& p, Sink& sink, int ranks, Schedule schedule,
                          const std::vector<InjectedFailure>& failures = {}, int slow_rank = -1) {
    RunOutcome outcome;
    outcome.results.resize(static_cast<std::size_t>(ranks));
    outcome.failures.resize(static_cast<std::size_t>(ranks));
    outcome.finished.resize(static_cast<std::size_t>(ranks));
    outcome.abandoned.resize(static_cast<std::size_t>(ranks));
    run_ranks(ranks, [&](Comm& comm) {
        const std::size_t me = static_cast<std::size_t>(comm.rank());
        const std::vector<Unit> units = p.units;  // every rank its own, as in a real run
        auto scheduler = make_scheduler(schedule, units, comm.size());
        MemoryIo io(p, sink, comm.rank(), failures,
                    std::chrono::milliseconds(comm.rank() == slow_rank ? kSlowStoreMilliseconds : 0));
        const RunContext context{p.spec, p.weights, p.settings, p.layout};
        try {
            outcome.results[me] = run_rounds(comm, context, *scheduler, io);
        } catch (const AgreedFailure& e) {
            outcome.failures[me].emplace(e);
        }
        outcome.finished[me] = io.finished;
        outcome.abandoned[me] = io.abandoned;
        EXPECT_EQ(io.watched_stores, io.stored_rounds.size()) << "rank " << me << ": stores without the compute flag";
        EXPECT_FALSE(io.watched()) << "rank " << me << ": the compute flag still watched after the run";
        // The coordinator stores each round it fetched, in the same order, and fetches the
        // final all-empty round that ends the loop.
        if (!outcome.failures[me]) {
            ASSERT_FALSE(io.fetched.empty());
            EXPECT_TRUE(round_is_empty(io.fetched.back()));
            EXPECT_TRUE(same_rounds(io.stored_rounds, std::vector<Round>(io.fetched.begin(), io.fetched.end() - 1)))
                << "rank " << me << ": " << io.fetched.size() << " fetches, " << io.stored_rounds.size() << " stores";
        } else {
            EXPECT_LE(io.stored_rounds.size(), io.fetched.size());
        }
    });
    return outcome;
}

// Plain double-precision attention of the embeddings with themselves, heads split along d.
void expect_matches_reference(const Problem& p, const Sink& sink) {
    const std::int64_t n = p.spec.n;
    const double scale = p.settings.spec.scale;
    for (std::int64_t s = 0; s < n; ++s) {
        const std::int32_t valid = p.lengths[static_cast<std::size_t>(s)];
        EXPECT_EQ(sink.lengths[static_cast<std::size_t>(s)], valid);
        for (std::int64_t h = 0; h < kHeads; ++h) {
            const auto x = [&](std::int64_t t, std::int64_t c) {
                return static_cast<double>(p.x[static_cast<std::size_t>((s * kLen + t) * kWidth + h * kHeadWidth + c)]);
            };
            for (std::int64_t i = 0; i < kLen; ++i) {
                const float lse = sink.lse[static_cast<std::size_t>((s * kHeads + h) * kLen + i)];
                const float* out = &sink.output[static_cast<std::size_t>((s * kLen + i) * kWidth + h * kHeadWidth)];
                const std::int64_t keys = i >= valid ? 0 : p.settings.spec.causal ? i + 1 : valid;
                if (keys == 0) {
                    EXPECT_TRUE(std::isinf(lse) && lse < 0) << "sequence " << s << " row " << i;
                    for (std::int64_t c = 0; c < kHeadWidth; ++c) EXPECT_EQ(out[c], 0.0f);
                    continue;
                }
                std::vector<double> logits(static_cast<std::size_t>(keys));
                double top = -std::numeric_limits<double>::infinity();
                for (std::int64_t j = 0; j < keys; ++j) {
                    double dot = 0;
                    for (std::int64_t c = 0; c < kHeadWidth; ++c) dot += x(i, c) * x(j, c);
                    logits[static_cast<std::size_t>(j)] = dot * scale;
                    top = std::max(top, dot * scale);
                }
                double total = 0;
                for (double l : logits) total += std::exp(l - top);
                EXPECT_NEAR(lse, top + std::log(total), 1e-5) << "sequence " << s << " head " << h << " row " << i;
                for (std::int64_t c = 0; c < kHeadWidth; ++c) {
                    double v = 0;
                    for (std::int64_t j = 0; j < keys; ++j) v += std::exp(logits[static_cast<std::size_t>(j)] - top) / total * x(j, c);
                    EXPECT_NEAR(out[c], v, 1e-5) << "sequence " << s << " head " << h << " row " << i << " column " << c;
                }
            }
        }
    }
}

TEST(RunRounds, ResultsAreBitIdenticalForEveryRankCountAndSchedule) {
    for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{3}, std::int64_t{4}, std::int64_t{37}}) {
        for (const Saved saved : {Saved::none, Saved::all, Saved::some}) {
            const bool causal = saved == Saved::some;
            const Problem p = make_problem(n, saved, causal);
            const std::string label = "N=" + std::to_string(n) + " save " + (saved == Saved::none ? "none" : saved == Saved::all ? "all" : "some") +
                                      (causal ? " causal" : "");
            SCOPED_TRACE(label);
            Sink baseline(p);
            run_on_threads(p, baseline, 1, Schedule::static_contiguous);
            for (std::int64_t s = 0; s < n; ++s) ASSERT_EQ(baseline.stored[static_cast<std::size_t>(s)], 1) << "sequence " << s;
            expect_matches_reference(p, baseline);
            if (HasFailure()) return;
            for (const int ranks : {1, 2, 3, 4}) {
                for (const Schedule schedule : {Schedule::static_contiguous, Schedule::dynamic}) {
                    SCOPED_TRACE(std::to_string(ranks) + " ranks, " + name_of(schedule));
                    Sink sink(p);
                    const RunOutcome outcome = run_on_threads(p, sink, ranks, schedule);
                    for (std::int64_t s = 0; s < n; ++s) {
                        EXPECT_EQ(sink.stored[static_cast<std::size_t>(s)], 1) << "sequence " << s;
                    }
                    EXPECT_TRUE(bit_identical(sink.output, baseline.output)) << "output";
                    EXPECT_TRUE(bit_identical(sink.lse, baseline.lse)) << "lse";
                    EXPECT_TRUE(bit_identical(sink.attention, baseline.attention)) << "attention";
                    EXPECT_EQ(sink.lengths, baseline.lengths);
                    // Every rank ends with the same report, accounting for every sequence once.
                    std::int64_t sequences = 0, units = 0;
                    for (const RankTimes& t : outcome.results[0].ranks) {
                        sequences += t.sequences;
                        units += t.units;
                        // CPU clocks beside the wall: one compute thread (p.settings) uses at
                        // most its busy time, the main thread at most the rounds' wall.
                        EXPECT_GE(t.compute_cpu, 0.0);
                        EXPECT_LE(t.compute_cpu, t.compute + 1e-6);
                        EXPECT_LE(t.compute_system, t.compute_cpu);
                        EXPECT_GE(t.io_cpu, 0.0);
                        EXPECT_LE(t.io_cpu, t.wall + 1e-6);
                        EXPECT_GE(t.wait, 0.0);
                        EXPECT_LE(t.wait, t.wall + 1e-6);
                        if (t.sequences > 0) {
                            EXPECT_GT(t.compute_cpu, 0.0);
                        }
                    }
                    EXPECT_EQ(sequences, n);
                    EXPECT_EQ(units, static_cast<std::int64_t>(p.units.size()));
                    for (int r = 0; r < ranks; ++r) {
                        const RunResult& result = outcome.results[static_cast<std::size_t>(r)];
                        EXPECT_EQ(result.ranks.size(), static_cast<std::size_t>(ranks));
                        EXPECT_EQ(result.rounds, outcome.results[0].rounds);
                        EXPECT_EQ(outcome.finished[static_cast<std::size_t>(r)], 1);
                        EXPECT_EQ(outcome.abandoned[static_cast<std::size_t>(r)], 0);
                    }
                    if (HasFailure()) return;
                }
            }
        }
    }
}

// A rank whose stores are slow holds every round's agreement: the other ranks' reports show
// them waiting for it (most of its delay, each round), and it waits far less itself.
TEST(RunRounds, RanksWaitingForASlowOneSayHowLong) {
    const Problem p = make_problem(37, Saved::none, false);
    for (const int ranks : {2, 3}) {
        SCOPED_TRACE(std::to_string(ranks) + " ranks");
        Sink sink(p);
        const int slow = ranks - 1;
        const RunOutcome outcome = run_on_threads(p, sink, ranks, Schedule::static_contiguous, {}, slow);
        const RunResult& result = outcome.results[0];
        ASSERT_EQ(result.ranks.size(), static_cast<std::size_t>(ranks));
        // Each of the slow rank's stores (one a round) comes late by the delay, and the others
        // meet it after each. The bounds leave room for a loaded machine: the fast ranks' own
        // work of a round (a few ms) is the part of the delay they do not wait, and the
        // mutation this guards against (the agreements' waits left out) gives them about 0.
        const double delayed = 0.001 * kSlowStoreMilliseconds * static_cast<double>(result.rounds);
        for (int r = 0; r < ranks; ++r) {
            const RankTimes& t = result.ranks[static_cast<std::size_t>(r)];
            if (r == slow) {
                EXPECT_LT(t.wait, 0.25 * delayed) << "the slow rank itself, " << result.rounds << " rounds";
            } else {
                EXPECT_GE(t.wait, 0.5 * delayed) << "rank " << r << ", " << result.rounds << " rounds";
                EXPECT_LE(t.wait, t.wall + 1e-6) << "rank " << r;
            }
        }
    }
}

TEST(RunRounds, AFailedFetchOnOneRankEndsEveryRankWithItsError) {
    const Problem p = make_problem(37, Saved::all, false);
    for (const int ranks : {2, 3, 4}) {
        for (const Schedule schedule : {Schedule::static_contiguous, Schedule::dynamic}) {
            for (const int failing : {0, ranks - 1}) {
                for (const int call : {0, 1, 3}) {
                    for (const bool in_store : {false, true}) {
                        InjectedFailure f;
                        f.rank = failing;
                        f.in_store = in_store;
                        f.call = call;
                        f.code = 4;
                        f.message = std::string(in_store ? "store" : "fetch") + " failed on rank " + std::to_string(failing);
                        SCOPED_TRACE(std::to_string(ranks) + " ranks, " + name_of(schedule) + ", " + f.message + " at call " +
                                     std::to_string(call));
                        Sink sink(p);
                        const RunOutcome outcome = run_on_threads(p, sink, ranks, schedule, {f});
                        for (int r = 0; r < ranks; ++r) {
                            const auto& failure = outcome.failures[static_cast<std::size_t>(r)];
                            ASSERT_TRUE(failure.has_value()) << "rank " << r << " did not fail";
                            EXPECT_EQ(failure->exit_code(), 4) << "rank " << r;
                            EXPECT_EQ(std::string(failure->what()), f.message) << "rank " << r;
                            EXPECT_EQ(outcome.abandoned[static_cast<std::size_t>(r)], 1) << "rank " << r;
                            EXPECT_EQ(outcome.finished[static_cast<std::size_t>(r)], 0) << "rank " << r;
                        }
                        for (int stored : sink.stored) EXPECT_LE(stored, 1);
                        if (HasFailure()) return;
                    }
                }
            }
        }
    }
}

TEST(RunRounds, TheLowestFailingRankWinsWhenSeveralFailInOneRound) {
    const Problem p = make_problem(37, Saved::none, false);
    for (const Schedule schedule : {Schedule::static_contiguous, Schedule::dynamic}) {
        SCOPED_TRACE(name_of(schedule));
        const std::vector<InjectedFailure> failures = {{3, false, 2, 3, "rank 3 saw bad data"},
                                                       {1, false, 2, 4, "rank 1 could not read"},
                                                       {2, true, 0, 4, "rank 2 could not write"}};
        Sink sink(p);
        const RunOutcome outcome = run_on_threads(p, sink, 4, schedule, failures);
        for (int r = 0; r < 4; ++r) {
            const auto& failure = outcome.failures[static_cast<std::size_t>(r)];
            ASSERT_TRUE(failure.has_value()) << "rank " << r;
            // Rank 2's first store (of round 0) and the third fetches (of round 2) happen in the
            // same iteration, before one agreement: the lowest rank of the three wins.
            EXPECT_EQ(failure->exit_code(), 4) << "rank " << r;
            EXPECT_EQ(std::string(failure->what()), "rank 1 could not read") << "rank " << r;
            EXPECT_EQ(outcome.abandoned[static_cast<std::size_t>(r)], 1);
            EXPECT_EQ(outcome.finished[static_cast<std::size_t>(r)], 0);
        }
    }
}

TEST(RunRounds, AComputeFailureOnOneRankEndsEveryRank) {
    // The kernel throws on the compute thread; the rank reports it in that round's agreement.
    const Problem p = make_problem(37, Saved::all, false);
    for (const Schedule schedule : {Schedule::static_contiguous, Schedule::dynamic}) {
        SCOPED_TRACE(name_of(schedule));
        InjectedFailure f;
        f.rank = 1;
        f.call = 1;
        f.bad_length = true;
        Sink sink(p);
        const RunOutcome outcome = run_on_threads(p, sink, 3, schedule, {f});
        for (int r = 0; r < 3; ++r) {
            const auto& failure = outcome.failures[static_cast<std::size_t>(r)];
            ASSERT_TRUE(failure.has_value()) << "rank " << r;
            EXPECT_EQ(failure->exit_code(), 1) << "rank " << r;
            EXPECT_EQ(std::string(failure->what()).rfind("internal error computing sequences: ", 0), 0u) << failure->what();
            EXPECT_EQ(outcome.abandoned[static_cast<std::size_t>(r)], 1);
            EXPECT_EQ(outcome.finished[static_cast<std::size_t>(r)], 0);
        }
    }
}

TEST(RunRounds, AFailureInTheLastRoundStillEndsEveryRank) {
    // The final fetch (of the all-empty round) and the final store, after the loop.
    const Problem p = make_problem(37, Saved::none, false);
    const int ranks = 3;
    const Plan plan = plan_static(p.units, ranks, StaticStrategy::contiguous);
    const int rounds = static_cast<int>(static_rounds(p.units, plan, kMaxSequences, kMinRounds).size());
    ASSERT_GT(rounds, 2);
    for (const bool in_store : {false, true}) {
        SCOPED_TRACE(in_store ? "last store" : "last fetch");
        const InjectedFailure f{1, in_store, in_store ? rounds - 1 : rounds, 4, "late failure"};
        Sink sink(p);
        const RunOutcome outcome = run_on_threads(p, sink, ranks, Schedule::static_contiguous, {f});
        for (int r = 0; r < ranks; ++r) {
            const auto& failure = outcome.failures[static_cast<std::size_t>(r)];
            ASSERT_TRUE(failure.has_value()) << "rank " << r;
            EXPECT_EQ(std::string(failure->what()), "late failure");
            EXPECT_EQ(outcome.abandoned[static_cast<std::size_t>(r)], 1);
            EXPECT_EQ(outcome.finished[static_cast<std::size_t>(r)], 0);
        }
    }
}

// Counts the collectives a rank enters while run_rounds says its compute is idle (where a
// wait may poll) and while a step computes (where it must sleep).
class IdleSpy final : public Comm {
public:
    explicit IdleSpy(Comm& inner) : inner_(inner) {}
    int rank() const override { return inner_.rank(); }
    int size() const override { return inner_.size(); }
    void barrier() override {
        note();
        inner_.barrier();
    }
    void broadcast(void* data, std::size_t bytes, int root) override {
        note();
        inner_.broadcast(data, bytes, root);
    }
    std::int64_t max(std::int64_t value) override {
        note();
        return inner_.max(value);
    }
    double max(double value) override {
        note();
        return inner_.max(value);
    }
    double sum(double value) override {
        note();
        return inner_.sum(value);
    }
    std::vector<double> all_gather(const std::vector<double>& values) override {
        note();
        return inner_.all_gather(values);
    }
    void send(const void* data, std::size_t bytes, int destination, int tag) override {
        note();
        inner_.send(data, bytes, destination, tag);
    }
    void recv(void* data, std::size_t bytes, int source, int tag) override {
        note();
        inner_.recv(data, bytes, source, tag);
    }
    [[noreturn]] void abort(int code) override {
        inner_.abort(code);
        std::abort();  // not reached: the inner abort does not return either
    }
    void set_compute_idle(bool now) override { idle = idle_now_ = now; }

    bool idle = false;  // as last set
    int idle_waits = 0, busy_waits = 0;

private:
    void note() { ++(idle_now_ ? idle_waits : busy_waits); }
    Comm& inner_;
    bool idle_now_ = false;
};

TEST(RunRounds, WaitsMayPollOnlyBetweenSteps) {
    const Problem p = make_problem(37, Saved::all, false);
    for (const Schedule schedule : {Schedule::static_contiguous, Schedule::dynamic}) {
        for (const bool failing : {false, true}) {
            SCOPED_TRACE(std::string(name_of(schedule)) + (failing ? ", a store fails" : ""));
            Sink sink(p);
            std::vector<RunResult> results(2);
            InjectedFailure f;
            f.rank = 1;
            f.in_store = true;
            f.call = 2;
            f.code = 4;
            f.message = "store failed";
            run_ranks(2, [&](Comm& comm) {
                IdleSpy spy(comm);
                MemoryIo io(p, sink, comm.rank(), failing ? std::vector<InjectedFailure>{f} : std::vector<InjectedFailure>{});
                auto scheduler = make_scheduler(schedule, p.units, comm.size());
                const RunContext context{p.spec, p.weights, p.settings, p.layout};
                const std::size_t me = static_cast<std::size_t>(comm.rank());
                try {
                    results[me] = run_rounds(spy, context, *scheduler, io);
                    EXPECT_FALSE(failing) << "rank " << me;
                } catch (const AgreedFailure&) {
                    EXPECT_TRUE(failing) << "rank " << me;
                }
                // Every round agrees twice after its compute (failures, then stop signals).
                if (!failing) EXPECT_GE(spy.idle_waits, 2 * results[me].rounds) << "rank " << me;
                else EXPECT_GE(spy.idle_waits, 2) << "rank " << me;
                // The static schedule has no collective beside a running step; the dynamic one
                // decides the next round while this one computes.
                if (schedule == Schedule::static_contiguous) {
                    EXPECT_EQ(spy.busy_waits, 0) << "rank " << me;
                } else if (!failing) {
                    EXPECT_GT(spy.busy_waits, 0) << "rank " << me;
                }
                EXPECT_FALSE(spy.idle) << "rank " << me << ": left marked idle after run_rounds";
            });
            if (HasFailure()) return;
        }
    }
}

// ---------------------------------------------------------------- gather I/O on threads

struct OutputContents {
    std::vector<float> output, lse, attention;
    std::vector<std::int32_t> lengths;
};

OutputContents read_output(const std::string& path) {
    const io::File file = io::File::open(path, io::FileMode::read_only);
    OutputContents c;
    c.output = io::read_all<float>(io::Dataset::open(file, "/output"));
    c.lse = io::read_all<float>(io::Dataset::open(file, "/lse"));
    c.attention = io::read_all<float>(io::Dataset::open(file, "/attention"));
    c.lengths = io::read_all<std::int32_t>(io::Dataset::open(file, "/lengths"));
    return c;
}

TEST(GatherIo, RankZeroReadsAndWritesForEveryRankWithSynchronousSends) {
    // The gather protocol (headers, data, results) through ThreadComm, every send waiting
    // for its receive as MPI may for large messages: the file matches a one-rank run's.
    const Problem p = make_problem(37, Saved::some, false);
    TempDir dir;
    const std::string input = dir.file("input.h5");
    {
        io::File file = io::File::create(input);
        {
            const io::Dataset x = io::Dataset::create(file, "/embeddings", io::Datatype::float32(), {37, kLen, kWidth});
            io::write_slab(x, io::Slab{}, p.x.data(), p.x.size());
            const io::Dataset lengths = io::Dataset::create(file, "/lengths", io::Datatype::int32(), {37});
            io::write_slab(lengths, io::Slab{}, p.lengths.data(), p.lengths.size());
        }
        file.close();
    }
    io::InputOptions options;
    options.input_path = input;
    options.heads = static_cast<int>(kHeads);
    io::InputSpec spec = io::describe_input(options);
    ASSERT_EQ(spec.d_k, kHeadWidth);
    io::OutputLayout layout = io::output_layout_for(spec);
    layout.save_weights = p.layout.save_weights;
    layout.weights_first = p.layout.weights_first;
    layout.weights_last = p.layout.weights_last;

    ThreadCommOptions comm_options;
    comm_options.synchronous_sends = true;
    OutputContents baseline;
    for (const int ranks : {1, 2, 3, 4}) {
        for (const Schedule schedule : {Schedule::static_contiguous, Schedule::dynamic}) {
            SCOPED_TRACE(std::to_string(ranks) + " ranks, " + name_of(schedule));
            const std::string output = dir.file("out_" + std::to_string(ranks) + name_of(schedule) + ".h5");
            run_ranks(
                ranks,
                [&](Comm& comm) {
                    std::unique_ptr<io::InputReader> reader;
                    std::unique_ptr<io::OutputFile> file;
                    if (comm.is_root()) {
                        reader = std::make_unique<io::InputReader>(spec);
                        io::Provenance provenance;
                        provenance.ranks = comm.size();
                        file = std::make_unique<io::OutputFile>(io::OutputFile::create(output, layout, provenance));
                    }
                    const std::vector<Unit> units = p.units;
                    auto scheduler = make_scheduler(schedule, units, comm.size());
                    auto step_io = make_gather_io(comm, spec, layout, std::move(reader), std::move(file));
                    const RunContext context{spec, p.weights, p.settings, layout};
                    run_rounds(comm, context, *scheduler, *step_io);
                },
                comm_options);
            ASSERT_TRUE(std::filesystem::exists(output));
            ASSERT_FALSE(std::filesystem::exists(io::partial_path_for(output)));
            const OutputContents got = read_output(output);
            if (ranks == 1 && schedule == Schedule::static_contiguous) {
                baseline = got;
                EXPECT_EQ(got.lengths, p.lengths);
                continue;
            }
            EXPECT_TRUE(bit_identical(got.output, baseline.output));
            EXPECT_TRUE(bit_identical(got.lse, baseline.lse));
            EXPECT_TRUE(bit_identical(got.attention, baseline.attention));
            EXPECT_EQ(got.lengths, baseline.lengths);
        }
    }
}

}  // namespace
}  // namespace attnbatch::distributed
