// `run --report FILE.json`: the report is JSON a parser accepts whatever the paths hold (it is
// written by the JSON writer, not by hand), and its figures add up to what the run did.
#include "support/attnbatch_binary.hpp"
#include "support/child_process.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

namespace attnbatch::testing {
namespace {

const std::vector<std::pair<std::string, std::string>> kMpiEnv = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                                                                  {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};

TEST(RunReport, IsValidJsonWithQuotesAndBackslashesInThePaths) {
    const TempDir dir;
    const std::string input = dir.file("in.h5"), output = dir.file("o\"ut\\1.h5"), report = dir.file("re\"port.json");
    const Outcome generated = attnbatch({"generate", "--output", input, "--num-seqs", "7", "--seq-len", "9", "--dim", "8",
                                         "--min-len", "1", "--seed", "3"});
    ASSERT_EQ(generated.status, 0) << generated.err;
    const Outcome run = attnbatch({"run", "--input", input, "--output", output, "--heads", "2", "--unit-sequences", "2",
                                   "--progress", "never", "--isa", "portable", "--report", report},
                                  kMpiEnv);
    ASSERT_EQ(run.status, 0) << run.err;
    const Outcome parsed = python(
        "import json, sys\n"
        "r = json.load(open(sys.argv[1]))\n"
        "assert r['output'] == sys.argv[2], r['output']\n"
        "assert r['ranks'] == 1 and len(r['per_rank']) == 1, r\n"
        "q = r['per_rank'][0]\n"
        "assert q['sequences'] == 7, q\n"
        "# CPU clocks beside the wall: the compute's threads use at most their busy time each\n"
        "assert 0 < q['compute_cpu'] <= q['compute'] * r['threads'] + 1e-6, q\n"
        "assert 0 <= q['compute_system'] <= q['compute_cpu'] and 0 <= q['io_cpu'] <= q['wall'] + 1e-6, q\n"
        "# one rank has no other to wait for: its agreements are with itself\n"
        "assert 0 <= q['wait'] < 0.01, q\n"
        "assert r['units'] >= 4 and r['max_sequences_per_step'] == 2, r  # 7 sequences, at most 2 a step\n"
        "# --isa portable is on every CPU: the report names the backend the products ran on\n"
        "assert r['matrix_unit'] == 'portable', r['matrix_unit']\n"
        "assert q['row_block'] is None, q  # the portable kernel has no row block to choose\n"
        "print('ok')\n",
        {report, output});
    EXPECT_EQ(parsed.out, "ok\n") << parsed.out;
}

// The start-up and shut-down breakdown: every phase present, none negative, and the two sums
// made of exactly their phases (a phase left out of a sum, or timed twice, shows here).
TEST(RunReport, PhasesAddUpToStartUpAndShutDown) {
    const TempDir dir;
    const std::string input = dir.file("in.h5"), output = dir.file("out.h5"), report = dir.file("report.json");
    const Outcome generated = attnbatch({"generate", "--output", input, "--num-seqs", "6", "--seq-len", "8", "--dim", "8",
                                         "--seed", "4"});
    ASSERT_EQ(generated.status, 0) << generated.err;
    const Outcome run = attnbatch({"run", "--input", input, "--output", output, "--save-weights", "all", "--unit-sequences", "2",
                                   "--progress", "never", "--report", report},
                                  kMpiEnv);
    ASSERT_EQ(run.status, 0) << run.err;
    const Outcome parsed = python(
        "import json, sys\n"
        "r = json.load(open(sys.argv[1]))\n"
        "p = r['phase_seconds']\n"
        "before = ['describe', 'lengths', 'plan', 'preflight', 'value_scan', 'output_creation', 'first_read']\n"
        "after = ['last_write', 'close', 'publish']\n"
        "assert sorted(p) == sorted(['mpi_init', 'rounds'] + before + after), sorted(p)\n"
        "assert all(v >= 0 for v in p.values()), p\n"
        "assert abs(r['start_up_seconds'] - p['mpi_init'] - sum(p[k] for k in before)) < 1e-6, r\n"
        "assert abs(r['shut_down_seconds'] - sum(p[k] for k in after)) < 1e-6, r\n"
        "assert p['rounds'] > 0 and p['output_creation'] > 0 and p['publish'] > 0, p\n"
        "# the best kernel here: a row block (8 or 12 rows) exactly where it is the avx512 one\n"
        "for q in r['per_rank']:\n"
        "    assert (q['row_block'] in (8, 12)) if r['matrix_unit'] == 'avx512' else q['row_block'] is None, (r['matrix_unit'], q)\n"
        "print('ok')\n",
        {report});
    EXPECT_EQ(parsed.out, "ok\n") << parsed.out;
}

}  // namespace
}  // namespace attnbatch::testing
