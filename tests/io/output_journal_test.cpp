// The progress journal: units recorded as done only at checkpoints, reopened for --resume,
// damaged data found by its checksum; the identity comparison; the fault specification.
#include "attnbatch/io/fault_injection.hpp"
#include "attnbatch/io/journal.hpp"
#include "support/output_fixtures.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace attnbatch::io {
namespace {

using testing::provenance;
using testing::RunData;
using testing::small_layout;
using testing::write_all;

class Journal : public ::testing::Test {
protected:
    testing::TempDir dir;
    const std::string path = dir.file("out.h5");
    OutputLayout layout = [] {
        OutputLayout l = small_layout();
        l.n = 6;
        return l;
    }();
    RunData data{layout};
    OutputOptions options_with(std::vector<std::int64_t> bounds) {
        OutputOptions options;
        options.journal = JournalPlan{std::move(bounds), "input = in.h5\ncausal = false\n"};
        return options;
    }
};

TEST_F(Journal, UnitsAreDoneOnlyAfterACheckpointWithTheChecksumOfTheirBytes) {
    {
        OutputFile out = OutputFile::create(path, layout, provenance(), options_with({0, 2, 3, 6}));
        out.write_block(0, 3, data.block(layout, 0));  // units 0 and 1
        EXPECT_EQ(out.journal_state().done_units(), 0) << "written is not yet done";
        out.checkpoint();
        out.write_block(3, 6, data.block(layout, 3));  // unit 2, never checkpointed
        out.close_incomplete();
    }
    const OutputFile again = OutputFile::reopen(path, layout);
    const JournalState state = again.journal_state();
    EXPECT_EQ(state.plan.unit_bounds, (std::vector<std::int64_t>{0, 2, 3, 6}));
    EXPECT_EQ(state.plan.identity, "input = in.h5\ncausal = false\n");
    EXPECT_EQ(state.done, (std::vector<std::int64_t>{1, 1, 0}));
    EXPECT_EQ(static_cast<std::uint64_t>(state.checksums[0]), unit_checksum(layout, 0, 2, 0, data.block(layout, 0)));
    EXPECT_EQ(static_cast<std::uint64_t>(state.checksums[1]), unit_checksum(layout, 2, 3, 2, data.block(layout, 2)));
    EXPECT_NE(state.checksums[0], state.checksums[1]);
    EXPECT_TRUE(again.units_failing_checksum(state).empty());
    EXPECT_EQ(read_journal_identity(path + ".partial"), state.plan.identity);
}

TEST_F(Journal, ABlockThatIsNotWholeUnitsIsALogicError) {
    OutputFile out = OutputFile::create(path, layout, provenance(), options_with({0, 2, 6}));
    EXPECT_THROW(out.write_block(0, 3, data.block(layout, 0)), std::logic_error);
}

TEST_F(Journal, DamagedDataOfADoneUnitFailsItsChecksum) {
    {
        OutputFile out = OutputFile::create(path, layout, provenance(), options_with({0, 3, 6}));
        write_all(out, data, 3);
        out.checkpoint();
        out.close_incomplete();
    }
    {
        // The second unit's lengths rewritten behind the journal's back, as a lost write would.
        OutputFile out = OutputFile::reopen(path, layout);
        const std::int32_t wrong[3] = {9, 9, 9};
        write_rows(Dataset::open(out.file(), "/lengths"), 3, 3, wrong, 3);
        out.close_incomplete();
    }
    const OutputFile again = OutputFile::reopen(path, layout);
    EXPECT_EQ(again.units_failing_checksum(again.journal_state()), (std::vector<std::int64_t>{1}));
}

TEST_F(Journal, AChecksumCoversEveryDatasetOfItsUnit) {
    const OutputBlock block = data.block(layout, 0);
    const std::uint64_t base = unit_checksum(layout, 1, 2, 0, block);
    for (auto field : {&RunData::output, &RunData::lse, &RunData::attention}) {
        RunData changed = data;
        const std::size_t per = (changed.*field).size() / static_cast<std::size_t>(layout.n);
        (changed.*field)[per + per / 2] += 1.0f;  // sequence 1
        EXPECT_NE(unit_checksum(layout, 1, 2, 0, changed.block(layout, 0)), base);
        EXPECT_EQ(unit_checksum(layout, 2, 3, 0, changed.block(layout, 0)), unit_checksum(layout, 2, 3, 0, block));
    }
}

TEST_F(Journal, ReopeningAFileWithoutAJournalOrWithOtherShapesIsAnIoErrorWithAHint) {
    {
        OutputFile out = OutputFile::create(path, layout, provenance());  // no journal
        out.close_incomplete();
    }
    try {
        OutputFile::reopen(path, layout);
        ADD_FAILURE() << "no Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), exit_io);
        EXPECT_NE(std::string(e.what()).find("--force instead of --resume"), std::string::npos) << e.what();
    }
    EXPECT_THROW(read_journal_identity(path + ".partial"), Error);
    OutputLayout other = layout;
    other.d_out += 1;
    EXPECT_THROW(OutputFile::reopen(path, other), Error);
}

TEST(JournalIdentity, DifferencesNameEachKeyWithBothValues) {
    EXPECT_EQ(identity_differences("a = 1\nb = x\n", "a = 1\nb = x\n"), "");
    EXPECT_EQ(identity_differences("a = 1\nb = x\n", "b = y\na = 1\nc = 2\n"),
              "b: recorded x, now y; c: recorded (none), now 2");
    EXPECT_EQ(hash_text("a"), hash_text("a"));
    EXPECT_NE(hash_text("a"), hash_text("b"));
    EXPECT_EQ(hash_text("a").size(), 16u);
}

TEST(FaultInjection, MalformedSpecificationsAreUsageErrors) {
    for (const char* bad : {"x:before_flush:kill", "0:nowhere:kill", "0:before_flush:explode", "0:after_unit:0:kill",
                            "0:after_unit:x:kill", "0:kill", "0:a:b:c:d"}) {
        ::setenv("ATTNBATCH_FAULT", bad, 1);
        try {
            arm_fault_from_environment(0);
            ADD_FAILURE() << bad << ": accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.exit_code(), exit_usage);
            EXPECT_NE(std::string(e.what()).find("ATTNBATCH_FAULT"), std::string::npos);
        }
    }
    ::unsetenv("ATTNBATCH_FAULT");
}

TEST(FaultInjection, StrikesOnlyItsRankSiteAndCount) {
    ::setenv("ATTNBATCH_FAULT", "1:before_flush:2:throw", 1);
    arm_fault_from_environment(0);  // another rank: nothing armed here
    EXPECT_NO_THROW(fault_point("before_flush"));
    EXPECT_NO_THROW(fault_point("before_flush"));
    arm_fault_from_environment(1);
    EXPECT_NO_THROW(fault_point("after_flush"));
    EXPECT_NO_THROW(fault_point("before_flush"));  // the first visit
    EXPECT_THROW(fault_point("before_flush"), std::runtime_error);
    EXPECT_NO_THROW(fault_point("before_flush"));  // once only
    ::setenv("ATTNBATCH_FAULT", "*:after_unit:5:throw", 1);
    arm_fault_from_environment(3);
    EXPECT_NO_THROW(fault_point("after_unit", 4));
    EXPECT_THROW(fault_point("after_unit", 7), std::runtime_error);
    ::unsetenv("ATTNBATCH_FAULT");
    arm_fault_from_environment(0);
    EXPECT_NO_THROW(fault_point("after_unit", 100));
}

}  // namespace
}  // namespace attnbatch::io
