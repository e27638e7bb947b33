// The progress journal: units recorded as done only at checkpoints, reopened for --resume,
// damaged data found by its checksum; the identity comparison; the fault specification.
#include "attnbatch/io/h5/h5.hpp"
#include "attnbatch/io/output/fault_injection.hpp"
#include "attnbatch/io/output/journal.hpp"
#include "support/output_fixtures.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>

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


// ---- Spans: pieces of a sequence's rows and the packed layout ----

// Canonical buffers of a span (output_file.hpp): values from the absolute row, so any misplaced
// value shows.
struct SpanData {
    std::vector<float> output, lse, attention;
    std::vector<std::int32_t> lengths;
    OutputBlock block() const {
        return OutputBlock{output.data(), lse.data(), lengths.data(), attention.empty() ? nullptr : attention.data(), nullptr};
    }
};

// One sequence s, rows [r0, r1), of a layout (padded or packed).
SpanData piece_data(const OutputLayout& layout, std::int64_t s, std::int64_t r0, std::int64_t r1, std::int32_t length) {
    SpanData d;
    const std::int64_t rows = r1 - r0;
    for (std::int64_t r = r0; r < r1; ++r) {
        for (std::int64_t c = 0; c < layout.d_out; ++c) d.output.push_back(static_cast<float>(s * 1000 + r * 10 + c));
    }
    for (std::int64_t h = 0; h < layout.heads; ++h) {
        for (std::int64_t r = r0; r < r1; ++r) d.lse.push_back(static_cast<float>(-(s * 1000 + h * 100 + r)));
    }
    if (r1 == layout.rows_of(s)) d.lengths.push_back(length);
    const auto [w0, w1] = layout.weights_range(s, s + 1);
    if (w1 > w0) {
        for (std::int64_t h = 0; h < layout.weights_heads(); ++h) {
            for (std::int64_t r = r0; r < r1; ++r) {
                for (std::int64_t j = 0; j < layout.len; ++j) d.attention.push_back(static_cast<float>((s + h + r + j) % 7) / 7.0f);
            }
        }
    }
    (void)rows;
    return d;
}

TEST_F(Journal, PiecesAreJournaledWithTheirRowsAndFoundByTheirChecksums) {
    OutputLayout padded = small_layout();
    padded.n = 3;
    padded.len = 40;
    OutputOptions options;
    // Unit 0: sequence 0; units 1, 2: rows [0, 16) and [16, 40) of sequence 1; unit 3: sequence 2.
    options.journal = JournalPlan{{0, 1, 1, 2, 3}, "identity\n", {0, 0, 16, 0, 0}};
    const std::vector<std::int32_t> lengths = {40, 33, 7};
    {
        OutputFile out = OutputFile::create(path, padded, provenance(), options);
        // Whole sequences 0 and 2 (as write_block() takes them), the pieces of sequence 1.
        for (const OutputSpan span : {OutputSpan{0, 1, 0, 0}, OutputSpan{1, 2, 0, 16}, OutputSpan{1, 2, 16, 40}, OutputSpan{2, 3, 0, 0}}) {
            const std::int64_t row_last = span.piece() ? span.row_last : padded.len;
            const SpanData d = piece_data(padded, span.first, span.row_first, row_last, lengths[static_cast<std::size_t>(span.first)]);
            out.write_span(span, d.block());
        }
        out.checkpoint();
        out.close_incomplete();
    }
    {
        OutputFile again = OutputFile::reopen(path, padded);
        const JournalState state = again.journal_state();
        EXPECT_EQ(state.plan.unit_rows, (std::vector<std::int64_t>{0, 0, 16, 0, 0}));
        EXPECT_EQ(state.done, (std::vector<std::int64_t>{1, 1, 1, 1}));
        EXPECT_TRUE(again.units_failing_checksum(state).empty());
        // The pieces are the rows of the whole sequence, as one write of it would have made them.
        const std::vector<float> output = read_all<float>(Dataset::open(again.file(), "/output"));
        const std::vector<float> lse = read_all<float>(Dataset::open(again.file(), "/lse"));
        const SpanData whole = piece_data(padded, 1, 0, 40, 33);
        const std::size_t row = static_cast<std::size_t>(padded.len * padded.d_out), lse_row = static_cast<std::size_t>(padded.heads * padded.len);
        EXPECT_TRUE(std::equal(whole.output.begin(), whole.output.end(), output.begin() + static_cast<std::ptrdiff_t>(row)));
        EXPECT_TRUE(std::equal(whole.lse.begin(), whole.lse.end(), lse.begin() + static_cast<std::ptrdiff_t>(lse_row)));
        EXPECT_EQ(read_all<std::int32_t>(Dataset::open(again.file(), "/lengths")), lengths);
        again.close_incomplete();
    }
    {
        // Row 20 of sequence 1 rewritten behind the journal's back: the second piece fails.
        OutputFile out = OutputFile::reopen(path, padded);
        const std::vector<float> wrong(static_cast<std::size_t>(padded.d_out), 3.0f);
        write_slab(Dataset::open(out.file(), "/output"), Slab{{1, 20, 0}, {1, 1, static_cast<hsize_t>(padded.d_out)}}, wrong.data(),
                   wrong.size());
        out.close_incomplete();
    }
    const OutputFile again = OutputFile::reopen(path, padded);
    EXPECT_EQ(again.units_failing_checksum(again.journal_state()), (std::vector<std::int64_t>{2}));
}

TEST_F(Journal, PackedSpansLandOnTheirRowsAndColumns) {
    OutputLayout packed = small_layout();
    const std::vector<std::int32_t> lengths = {5, 0, 30, 2};
    auto offsets = std::make_shared<std::vector<std::int64_t>>(std::vector<std::int64_t>{0, 5, 5, 35, 37});
    packed.n = 4;
    packed.len = 30;
    packed.packed = true;
    packed.offsets = offsets;
    OutputOptions options;
    // Unit 0: sequences 0 and 1; units 1, 2: rows [0, 16), [16, 30) of sequence 2; unit 3: sequence 3.
    options.journal = JournalPlan{{0, 2, 2, 3, 4}, "identity\n", {0, 0, 16, 0, 0}};
    {
        OutputFile out = OutputFile::create(path, packed, provenance(), options);
        // Two whole sequences: their rows end to end, lse (H, rows) over both.
        SpanData first = piece_data(packed, 0, 0, 5, 5);
        first.lengths.push_back(0);
        out.write_span(OutputSpan{0, 2, 0, 0}, first.block());
        for (const OutputSpan span : {OutputSpan{2, 3, 0, 16}, OutputSpan{2, 3, 16, 30}, OutputSpan{3, 4, 0, 0}}) {
            const std::int64_t rows_last = span.piece() ? span.row_last : packed.rows_of(span.first);
            const SpanData d = piece_data(packed, span.first, span.row_first, rows_last, lengths[static_cast<std::size_t>(span.first)]);
            out.write_span(span, d.block());
        }
        out.checkpoint();
        out.close_incomplete();
    }
    OutputFile again = OutputFile::reopen(path, packed);
    const JournalState state = again.journal_state();
    EXPECT_EQ(state.done, (std::vector<std::int64_t>{1, 1, 1, 1}));
    EXPECT_TRUE(again.units_failing_checksum(state).empty());
    const Dataset output = Dataset::open(again.file(), "/output"), lse = Dataset::open(again.file(), "/lse");
    EXPECT_EQ(output.dims(), (Dims{37, static_cast<hsize_t>(packed.d_out)}));
    EXPECT_EQ(lse.dims(), (Dims{static_cast<hsize_t>(packed.heads), 37}));
    EXPECT_EQ(read_all<std::int64_t>(Dataset::open(again.file(), "/offsets")), *offsets);
    EXPECT_EQ(read_all<std::int32_t>(Dataset::open(again.file(), "/lengths")), lengths);
    const std::vector<float> rows = read_all<float>(output), columns = read_all<float>(lse);
    // Row 5 + 20 is row 20 of sequence 2; column 5 + 20 of head 1 likewise.
    EXPECT_EQ(rows[static_cast<std::size_t>(25 * packed.d_out + 3)], static_cast<float>(2 * 1000 + 20 * 10 + 3));
    EXPECT_EQ(columns[static_cast<std::size_t>(37 + 25)], static_cast<float>(-(2 * 1000 + 100 + 20)));
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
