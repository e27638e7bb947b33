// A whole job through the distributed layer's API, without the binary: prepare_job and
// run_job on P ranks of the thread-based Comm (gather I/O: rank 0 alone touches HDF5, which is
// not thread-safe), checked for the plan, the files it writes, an interrupted attempt and its
// resume, all against a one-rank run byte for byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "attnbatch/distributed/job.hpp"
#include "attnbatch/distributed/memory_model.hpp"
#include "attnbatch/distributed/stop_request.hpp"
#include "attnbatch/io/h5/h5.hpp"
#include "attnbatch/io/output/output_file.hpp"
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"
#include "support/thread_comm.hpp"

namespace attnbatch::distributed {
namespace {

using attnbatch::testing::run_ranks;

constexpr std::int64_t kSequences = 23, kLength = 12, kWidth = 8;

std::string bytes_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The results a run must make the same whatever its ranks: every data dataset, value for
// value (the root attributes record the ranks and differ on purpose).
std::vector<std::vector<float>> results_of(const std::string& path) {
    const io::File file = io::File::open(path, io::FileMode::read_only);
    std::vector<std::vector<float>> results;
    for (const char* name : {"/output", "/lse", "/attention"}) {
        results.push_back(io::read_all<float>(io::Dataset::open(file, name)));
    }
    const std::vector<std::int32_t> lengths = io::read_all<std::int32_t>(io::Dataset::open(file, "/lengths"));
    results.emplace_back(lengths.begin(), lengths.end());
    return results;
}

bool exists(const std::string& path) {
    struct stat status {};
    return ::stat(path.c_str(), &status) == 0;
}

class JobTest : public ::testing::Test {
protected:
    void SetUp() override {
        // Pins creation_time, so that two runs can make the same bytes.
        ::setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
        clear_stop_request();
        input_ = dir_.file("in.h5");
        std::vector<std::int32_t> lengths;
        for (std::int64_t n = 0; n < kSequences; ++n) lengths.push_back(static_cast<std::int32_t>((n * 7) % (kLength + 1)));
        std::vector<float> x(static_cast<std::size_t>(kSequences * kLength * kWidth));
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
        const io::File file = io::File::create(input_);
        attnbatch::testing::put(file, "/embeddings", io::Datatype::float32(), {kSequences, kLength, kWidth}, x);
        attnbatch::testing::put(file, "/lengths", io::Datatype::int32(), {kSequences}, lengths);
    }
    void TearDown() override { clear_stop_request(); }

    JobSettings settings(const std::string& output) const {
        JobSettings s;
        s.input.input_path = input_;
        s.input.heads = 2;
        s.output = dir_.file(output);
        s.attention.causal = true;
        s.io_mode = IoMode::gather;
        s.kernel.threads = 1;
        s.max_memory = std::size_t{1} << 30;
        s.unit_sequences = 2;  // many units, so that the plan and the resume have work to split
        s.recorded_config = "test = job\n";
        s.version = "test";
        return s;
    }

    // Runs the whole job on `ranks` ranks; returns the exit code every rank agreed on (0 when
    // the job completed) after checking that they agreed.
    int run(int ranks, const JobSettings& s, const RoundCallback& on_round = {}) {
        std::vector<int> codes(static_cast<std::size_t>(ranks), -1);
        run_ranks(ranks, [&](Comm& comm) {
            int code = 0;
            try {
                Job job = prepare_job(comm, s);
                if (!job.nothing_to_do()) run_job(job, on_round);
            } catch (const AgreedFailure& failure) {
                code = failure.exit_code();
            }
            codes[static_cast<std::size_t>(comm.rank())] = code;
        });
        for (int code : codes) EXPECT_EQ(code, codes[0]);
        return codes[0];
    }

    attnbatch::testing::TempDir dir_;
    std::string input_;
};

TEST_F(JobTest, PrepareDescribesPlansAndWritesNothing) {
    JobSettings s = settings("out.h5");
    s.dry_run = true;
    s.simulate_ranks = 5;
    run_ranks(3, [&](Comm& comm) {
        const Job job = prepare_job(comm, s);
        EXPECT_EQ(job.spec.n, kSequences);
        EXPECT_EQ(job.spec.heads, 2);
        EXPECT_EQ(job.plan_ranks, 5);  // the simulated ranks, not the 3 running
        EXPECT_EQ(job.io_mode, IoMode::gather);
        EXPECT_EQ(job.max_sequences, 2);
        EXPECT_EQ(job.units.size(), job.all_units.size());
        ASSERT_EQ(job.plan.ranks.size(), 5u);
        std::int64_t planned = 0;
        for (const RankShare& share : job.plan.ranks) planned += share.sequences;
        EXPECT_EQ(planned, kSequences);
        EXPECT_GT(job.sizes.attention, 0u);
    });
    EXPECT_FALSE(exists(s.output));
    EXPECT_FALSE(exists(s.output + ".partial"));
}

TEST_F(JobTest, ThreeRanksWriteTheBytesOfOne) {
    const JobSettings one = settings("one.h5"), three = settings("three.h5");
    ASSERT_EQ(run(1, one), 0);
    ASSERT_EQ(run(3, three), 0);
    ASSERT_TRUE(exists(one.output));
    EXPECT_FALSE(exists(one.output + ".partial"));
    const auto expected = results_of(one.output), found = results_of(three.output);
    ASSERT_EQ(expected.size(), found.size());
    for (std::size_t d = 0; d < expected.size(); ++d) {
        // Bit for bit: memcmp, so that NaN and -0 count as they are stored.
        ASSERT_EQ(expected[d].size(), found[d].size()) << "dataset " << d;
        EXPECT_EQ(std::memcmp(expected[d].data(), found[d].data(), expected[d].size() * sizeof(float)), 0) << "dataset " << d;
    }
    const io::File file = io::File::open(one.output, io::FileMode::read_only);
    EXPECT_EQ(io::get_int_attribute(file, "complete"), 1);
}

TEST_F(JobTest, AnInterruptedJobResumesToTheSameBytes) {
    // The uninterrupted run on the ranks of the first attempt: the root attribute `ranks`
    // records the first attempt's, and every other byte must match too.
    const JobSettings whole = settings("whole.h5");
    ASSERT_EQ(run(3, whole), 0);

    JobSettings s = settings("resumed.h5");
    std::once_flag stopped;
    const int code = run(3, s, [&](const RoundProgress& progress) {
        // As a SIGTERM would, once some units are written: every rank stops at the next round.
        if (progress.rounds == 2) std::call_once(stopped, [] { request_stop(SIGTERM); });
    });
    EXPECT_EQ(code, exit_interrupted);
    EXPECT_FALSE(exists(s.output));
    ASSERT_TRUE(exists(s.output + ".partial"));

    clear_stop_request();
    s.resume = true;
    std::int64_t units_done_before = -1;
    run_ranks(2, [&](Comm& comm) {  // another number of ranks, as a requeued job may get
        Job job = prepare_job(comm, s);
        ASSERT_EQ(job.resume.state, ResumeState::partial);
        EXPECT_LT(job.units.size(), job.all_units.size());
        if (comm.is_root()) units_done_before = job.done_before.units;
        run_job(job);
    });
    EXPECT_GT(units_done_before, 0);
    EXPECT_FALSE(exists(s.output + ".partial"));
    EXPECT_EQ(bytes_of(s.output), bytes_of(whole.output));

    // Complete now: a resume has nothing to do and leaves the file alone.
    run_ranks(2, [&](Comm& comm) { EXPECT_TRUE(prepare_job(comm, s).nothing_to_do()); });
    EXPECT_EQ(bytes_of(s.output), bytes_of(whole.output));
}


// ---- Long sequences split into pieces, the packed layout, row slabs under --max-memory ----

// A heavy-tailed input: short sequences around one that outweighs a rank's share, so that
// plans on several ranks split it into pieces of query rows.
class SplitJobTest : public JobTest {
protected:
    static constexpr std::int64_t kCount = 24, kLong = 320, kDim = 8;

    std::vector<std::int32_t> lengths() const {
        std::vector<std::int32_t> lengths;
        for (std::int64_t n = 0; n < kCount; ++n) lengths.push_back(static_cast<std::int32_t>(3 + (n * 5) % 29));
        lengths[9] = kLong;
        lengths[17] = kLong - 37;
        return lengths;
    }
    float value(std::size_t i) const { return static_cast<float>((i * 37) % 101) / 50.0f - 1.0f; }

    void SetUp() override {
        JobTest::SetUp();
        padded_ = dir_.file("padded.h5");
        packed_ = dir_.file("packed.h5");
        const std::vector<std::int32_t> lens = lengths();
        // The same tokens in both layouts: the packed rows are the padded rows below each length.
        std::vector<float> x(static_cast<std::size_t>(kCount * kLong * kDim), 0.0f), rows;
        std::vector<std::int64_t> offsets{0};
        for (std::int64_t n = 0; n < kCount; ++n) {
            for (std::int64_t t = 0; t < lens[static_cast<std::size_t>(n)]; ++t) {
                for (std::int64_t c = 0; c < kDim; ++c) {
                    const std::size_t at = static_cast<std::size_t>((n * kLong + t) * kDim + c);
                    x[at] = value(at);
                    rows.push_back(x[at]);
                }
            }
            offsets.push_back(offsets.back() + lens[static_cast<std::size_t>(n)]);
        }
        {
            const io::File file = io::File::create(padded_);
            attnbatch::testing::put(file, "/embeddings", io::Datatype::float32(), {kCount, kLong, kDim}, x);
            attnbatch::testing::put(file, "/lengths", io::Datatype::int32(), {kCount}, lens);
        }
        const io::File file = io::File::create(packed_);
        attnbatch::testing::put(file, "/tokens", io::Datatype::float32(), {static_cast<hsize_t>(offsets.back()), kDim}, rows);
        attnbatch::testing::put(file, "/offsets", io::Datatype::int64(), {kCount + 1}, offsets);
    }

    JobSettings split_settings(const std::string& input, const std::string& output) const {
        JobSettings s = settings(output);
        s.input.input_path = input;
        s.unit_sequences = 0;
        s.weights_sequences = SequenceRange{8, 18};  // the long ones' maps too
        return s;
    }

    static std::vector<Unit> units_of(int ranks, const JobSettings& s) {
        std::vector<Unit> units;
        run_ranks(ranks, [&](Comm& comm) {
            const Job job = prepare_job(comm, s);
            if (comm.is_root()) units = job.all_units;
        });
        return units;
    }

    static bool any_piece(const std::vector<Unit>& units) {
        return std::any_of(units.begin(), units.end(), [](const Unit& unit) { return unit.piece(); });
    }

    void expect_same_results(const std::string& expected_path, const std::string& found_path) {
        const auto expected = results_of(expected_path), found = results_of(found_path);
        ASSERT_EQ(expected.size(), found.size());
        for (std::size_t d = 0; d < expected.size(); ++d) {
            ASSERT_EQ(expected[d].size(), found[d].size()) << "dataset " << d;
            EXPECT_EQ(std::memcmp(expected[d].data(), found[d].data(), expected[d].size() * sizeof(float)), 0)
                << "dataset " << d << " of " << found_path;
        }
    }

    std::string padded_, packed_;
};

TEST_F(SplitJobTest, PiecesOnAnyRanksAndScheduleGiveTheBytesOfOneRank) {
    for (const std::string* input : {&padded_, &packed_}) {
        const JobSettings one = split_settings(*input, "one.h5");
        EXPECT_FALSE(any_piece(units_of(1, one)));  // one rank: nothing to balance
        ASSERT_EQ(run(1, one), 0);
        for (const ScheduleKind schedule : {ScheduleKind::cost_static, ScheduleKind::dynamic}) {
            for (const int ranks : {2, 3, 4}) {
                JobSettings s = split_settings(*input, "ranks" + std::to_string(ranks) + ".h5");
                s.schedule = schedule;
                SCOPED_TRACE(*input + " on " + std::to_string(ranks) + " ranks, " + name_of(schedule));
                EXPECT_TRUE(any_piece(units_of(ranks, s)));
                ASSERT_EQ(run(ranks, s), 0);
                expect_same_results(one.output, s.output);
                ::unlink(s.output.c_str());
            }
        }
        ::unlink(one.output.c_str());
    }
}

TEST_F(SplitJobTest, PackedRowsAreThePaddedRowsBelowEachLength) {
    const JobSettings padded = split_settings(padded_, "padded-out.h5"), packed = split_settings(packed_, "packed-out.h5");
    ASSERT_EQ(run(3, padded), 0);
    ASSERT_EQ(run(2, packed), 0);
    const io::File a = io::File::open(padded.output, io::FileMode::read_only);
    const io::File b = io::File::open(packed.output, io::FileMode::read_only);
    const auto out_a = io::read_all<float>(io::Dataset::open(a, "/output")), out_b = io::read_all<float>(io::Dataset::open(b, "/output"));
    const auto lse_a = io::read_all<float>(io::Dataset::open(a, "/lse")), lse_b = io::read_all<float>(io::Dataset::open(b, "/lse"));
    const auto offsets = io::read_all<std::int64_t>(io::Dataset::open(b, "/offsets"));
    const std::vector<std::int32_t> lens = lengths();
    ASSERT_EQ(offsets.size(), lens.size() + 1);
    const std::size_t d_out = out_a.size() / static_cast<std::size_t>(kCount * kLong), heads = 2;
    const auto total = static_cast<std::size_t>(offsets.back());
    ASSERT_EQ(out_b.size(), total * d_out);
    for (std::size_t n = 0; n < lens.size(); ++n) {
        const auto rows = static_cast<std::size_t>(lens[n]), row = static_cast<std::size_t>(offsets[n]);
        EXPECT_EQ(std::memcmp(out_a.data() + n * kLong * d_out, out_b.data() + row * d_out, rows * d_out * sizeof(float)), 0)
            << "sequence " << n;
        for (std::size_t h = 0; h < heads; ++h) {
            EXPECT_EQ(std::memcmp(lse_a.data() + (n * heads + h) * kLong, lse_b.data() + h * total + row, rows * sizeof(float)), 0)
                << "sequence " << n << " head " << h;
        }
    }
    EXPECT_EQ(io::read_all<float>(io::Dataset::open(a, "/attention")), io::read_all<float>(io::Dataset::open(b, "/attention")));
}

TEST_F(SplitJobTest, AnInterruptedJobWithPiecesResumesToTheSameBytes) {
    for (const std::string* input : {&padded_, &packed_}) {
        const JobSettings whole = split_settings(*input, "whole.h5");
        ASSERT_EQ(run(3, whole), 0);
        JobSettings s = split_settings(*input, "resumed.h5");
        std::once_flag stopped;
        EXPECT_EQ(run(3, s, [&](const RoundProgress& progress) {
                      if (progress.rounds == 3) std::call_once(stopped, [] { request_stop(SIGTERM); });
                  }),
                  exit_interrupted);
        ASSERT_TRUE(exists(s.output + ".partial"));
        clear_stop_request();
        s.resume = true;
        s.schedule = ScheduleKind::dynamic;  // anything may change but what changes the bits
        run_ranks(2, [&](Comm& comm) {
            Job job = prepare_job(comm, s);
            ASSERT_EQ(job.resume.state, ResumeState::partial);
            EXPECT_TRUE(any_piece(job.all_units));  // the first attempt's pieces, from its journal
            EXPECT_LT(job.units.size(), job.all_units.size());
            run_job(job);
        });
        EXPECT_EQ(bytes_of(s.output), bytes_of(whole.output)) << *input;
        ::unlink(s.output.c_str());
        ::unlink(whole.output.c_str());
    }
}

TEST_F(SplitJobTest, MapsAboveTheMemoryBoundAreWrittenInRowSlabs) {
    for (const std::string* input : {&padded_, &packed_}) {
        JobSettings roomy = split_settings(*input, "roomy.h5");
        roomy.weights_sequences.reset();
        ASSERT_EQ(run(1, roomy), 0);
        // The fixed part (kernel scratch, a margin for the process) plus a little: a long
        // sequence's maps (2 heads x 320 x 320 floats, twice in flight) no longer fit whole.
        JobSettings tight = roomy;
        tight.output = dir_.file("tight.h5");
        std::uint64_t fixed = 0;
        run_ranks(1, [&](Comm& comm) {
            JobSettings probe = roomy;
            probe.dry_run = true;
            const Job job = prepare_job(comm, probe);
            fixed = memory_model(job.spec, job.layout, job.attention.kernel, 2).fixed;
        });
        tight.max_memory = static_cast<std::size_t>(fixed) + 600 * 1024;
        const std::vector<Unit> units = units_of(1, tight);
        EXPECT_TRUE(any_piece(units));
        ASSERT_EQ(run(1, tight), 0);
        expect_same_results(roomy.output, tight.output);
        ::unlink(roomy.output.c_str());
        ::unlink(tight.output.c_str());
    }
}

TEST_F(SplitJobTest, KeysAndValuesThatDoNotFitNameTheSequence) {
    JobSettings s = split_settings(padded_, "out.h5");
    s.max_memory = std::size_t{64} << 20;  // below what any step needs
    std::string message;
    run_ranks(1, [&](Comm& comm) {
        try {
            prepare_job(comm, s);
        } catch (const AgreedFailure& failure) {
            message = failure.what();
            EXPECT_EQ(failure.exit_code(), exit_usage);
        }
    });
    EXPECT_NE(message.find("sequence 9 (length 320)"), std::string::npos) << message;
    EXPECT_NE(message.find("--max-memory"), std::string::npos) << message;
}

TEST_F(JobTest, TheResumeInspectionInSlicesFindsWhatItFindsAtOnce) {
    JobSettings s = settings("sliced.h5");
    std::once_flag stopped;
    ASSERT_EQ(run(2, s, [&](const RoundProgress& progress) {
                  if (progress.rounds == 3) std::call_once(stopped, [] { request_stop(SIGTERM); });
              }),
              exit_interrupted);
    clear_stop_request();
    io::OutputLayout layout;
    std::string identity;
    s.resume = true;
    run_ranks(1, [&](Comm& comm) {
        const Job job = prepare_job(comm, s);
        layout = job.layout;
        identity = job.identity;
    });
    const ResumeState whole = inspect_for_resume(s.output, false, layout, identity);
    ResumeInspection inspection(s.output, false, layout, identity);
    int slices = 1;
    while (!inspection.verify_some(1)) ++slices;  // one unit at a time
    const ResumeState sliced = inspection.result();
    EXPECT_EQ(sliced.state, ResumeState::partial);
    EXPECT_EQ(sliced.done, whole.done);
    EXPECT_EQ(sliced.unit_bounds, whole.unit_bounds);
    EXPECT_EQ(sliced.summary, whole.summary);
    // One done unit per slice (the units not done cost nothing to check).
    std::int64_t done_units = 0;
    for (std::int64_t d : whole.done) done_units += d;
    EXPECT_GE(done_units, 2);
    EXPECT_GE(slices, done_units);
    EXPECT_LE(slices, done_units + 1);
}

TEST_F(JobTest, AFailureOnRankZeroEndsEveryRankWithItsCode) {
    JobSettings s = settings("out.h5");
    s.input.input_path = dir_.file("missing.h5");
    EXPECT_EQ(run(3, s), exit_io);
    EXPECT_FALSE(exists(s.output));
}

// The preflight is the real run's own checks before its first write: a dry run that calls it
// fails where the run would, with the same code on every rank, and changes nothing.
TEST_F(JobTest, PreflightFailsWhereTheRunWouldAndChangesNothing) {
    JobSettings s = settings("out.h5");
    { std::ofstream(s.output) << "an earlier result\n"; }
    const std::string before = bytes_of(s.output);
    for (const bool dry_run : {true, false}) {
        s.dry_run = dry_run;
        std::vector<int> codes(3, -1);
        run_ranks(3, [&](Comm& comm) {
            Job job = prepare_job(comm, s);  // the output is not prepare_job's business
            try {
                if (dry_run) preflight(job);
                else run_job(job);
            } catch (const AgreedFailure& failure) {
                codes[static_cast<std::size_t>(comm.rank())] = failure.exit_code();
            }
        });
        EXPECT_EQ(codes, std::vector<int>(3, exit_usage)) << (dry_run ? "dry run" : "run");
    }
    EXPECT_EQ(bytes_of(s.output), before);
    EXPECT_FALSE(exists(s.output + ".partial"));

    s.output = dir_.file("no/such/dir/out.h5");
    run_ranks(2, [&](Comm& comm) {
        Job job = prepare_job(comm, s);
        try {
            preflight(job);
            ADD_FAILURE() << "a missing output directory passed the preflight";
        } catch (const AgreedFailure& failure) {
            EXPECT_EQ(failure.exit_code(), exit_io);
            EXPECT_NE(std::string(failure.what()).find("does not exist"), std::string::npos) << failure.what();
        }
    });
}

// A requeued job whose options were edited must not keep the old results: the complete
// OUTPUT's journal identity is compared as a .partial's is.
TEST_F(JobTest, ResumeOfACompleteOutputChecksTheIdentityItRecords) {
    JobSettings s = settings("out.h5");
    ASSERT_EQ(run(2, s), 0);
    const std::string before = bytes_of(s.output);
    s.resume = true;
    s.attention.causal = false;  // the first attempt was causal
    for (const bool dry_run : {true, false}) {
        s.dry_run = dry_run;
        EXPECT_EQ(run(2, s), exit_usage) << (dry_run ? "dry run" : "run");
    }
    s.attention.causal = true;
    run_ranks(2, [&](Comm& comm) { EXPECT_TRUE(prepare_job(comm, s).nothing_to_do()); });
    EXPECT_EQ(bytes_of(s.output), before);
}

// --sequences: one block of the input, computed as in a whole run (the same bits), its rows
// numbered from first_sequence.
TEST_F(JobTest, ABlockOfSequencesIsThoseRowsOfTheWholeRun) {
    const JobSettings whole = settings("whole.h5");
    ASSERT_EQ(run(1, whole), 0);
    JobSettings s = settings("part.h5");
    s.sequences = SequenceRange{5, 17};
    s.weights_sequences = SequenceRange{8, -1};  // input numbers, up to the block's end
    ASSERT_EQ(run(3, s), 0);
    const io::File part = io::File::open(s.output, io::FileMode::read_only);
    const io::File all = io::File::open(whole.output, io::FileMode::read_only);
    EXPECT_EQ(io::get_int_attribute(part, "first_sequence"), 5);
    const auto rows = [](const io::File& file, const char* name, hsize_t first, hsize_t count) {
        const io::Dataset dataset = io::Dataset::open(file, name);
        io::Dims dims = dataset.dims();
        std::vector<float> values(io::element_count(dims) / dims[0] * count);
        io::read_rows(dataset, first, count, values.data(), values.size());
        return values;
    };
    for (const char* name : {"/output", "/lse"}) {
        const std::vector<float> expected = rows(all, name, 5, 12), found = rows(part, name, 0, 12);
        ASSERT_EQ(expected.size(), found.size()) << name;
        EXPECT_EQ(std::memcmp(expected.data(), found.data(), found.size() * sizeof(float)), 0) << name;
    }
    const io::Dataset attention = io::Dataset::open(part, "/attention");
    EXPECT_EQ(attention.dims()[0], 9u);  // sequences 8 to 16
    EXPECT_EQ(io::get_int_attribute(attention, "first_sequence"), 8);
    const std::vector<float> expected = rows(all, "/attention", 8, 9), found = rows(part, "/attention", 0, 9);
    EXPECT_EQ(std::memcmp(expected.data(), found.data(), found.size() * sizeof(float)), 0);

    s.output = dir_.file("past.h5");
    s.sequences = SequenceRange{20, 30};
    EXPECT_EQ(run(2, s), exit_usage);
    EXPECT_FALSE(exists(s.output));
}

}  // namespace
}  // namespace attnbatch::distributed
