// A whole job through the distributed layer's API, without the binary: prepare_job and
// run_job on P ranks of the thread-based Comm (gather I/O: rank 0 alone touches HDF5, which is
// not thread-safe), checked for the plan, the files it writes, an interrupted attempt and its
// resume, all against a one-rank run byte for byte.
#include <gtest/gtest.h>

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
#include "attnbatch/distributed/stop_request.hpp"
#include "attnbatch/io/h5.hpp"
#include "attnbatch/io/output.hpp"
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
        s.causal = true;
        s.io = IoMode::gather;
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
        EXPECT_EQ(job.io, IoMode::gather);
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

}  // namespace
}  // namespace attnbatch::distributed
