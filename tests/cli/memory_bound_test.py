#!/usr/bin/python3
"""`attnbatch run --max-memory BUDGET` keeps its resident memory under BUDGET whatever N is.

Usage: memory_bound_test.py ATTNBATCH_BINARY WORK_DIR

Three runs, each measured with `/usr/bin/time -v` (Debian package `time`, installed by
scripts/install-deps.sh) and checked with `attnbatch verify --samples 4`:

  embeddings  an input about 4x the budget (800 MiB against --max-memory 200M), no weights
              stored: the input and the (as large) /output must both stream through.
  weights     a small input whose attention weights (--save-weights all, 1 GiB) are 4x the
              budget (--max-memory 256M).
  long        ONE sequence of L = 8192, H = 2, --save-weights all: its maps alone (512 MiB)
              are twice the budget (--max-memory 256M), so they are computed and written in
              row slabs (pieces of its query rows).

The run's fixed margin is 128 MiB (src/distributed/memory_model.cpp) and the process's own baseline is
about 30 MiB, so budgets of 200-256 MiB leave room for several units of sequences: the run
must stream through units (at least 4), not load the batch whole.

Prints the measured peak RSS, the budget and the sizes; exits non-zero on any failure. The
big files are removed at the end, pass or fail.
"""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, failures, fresh_directory  # noqa: E402

MIB = 1 << 20
TIME = "/usr/bin/time"

CASES = [
    # name, generate options, run options, budget (MiB), data at least this many budgets
    ("embeddings",
     ["--num-seqs", "51200", "--seq-len", "64", "--dim", "64"],
     ["--save-weights", "none"],
     200, 3.5),
    ("weights",
     ["--num-seqs", "4096", "--seq-len", "256", "--dim", "16", "--min-len", "64"],
     ["--save-weights", "all"],
     256, 3.5),
    ("long",
     ["--num-seqs", "1", "--seq-len", "8192", "--dim", "64", "--heads", "2"],
     ["--heads", "2", "--save-weights", "all"],
     256, 1.9),
]

def run(args, **kwargs):
    started = time.monotonic()
    result = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
    return result, time.monotonic() - started


def run_case(binary, work, name, generate_options, run_options, budget_mib, data_factor):
    budget = budget_mib * MIB
    input_path = os.path.join(work, name + "-in.h5")
    output_path = os.path.join(work, name + "-out.h5")
    gen, seconds = run([binary, "generate", "--output", input_path, "--force"] + generate_options)
    if gen.returncode != 0:
        check(False, "%s: generate failed (exit %d): %s" % (name, gen.returncode, gen.stderr.strip()))
        return
    input_bytes = os.path.getsize(input_path)
    print("%s: generated %s: %.1f MiB in %.1f s" % (name, input_path, input_bytes / MIB, seconds), flush=True)

    command = [TIME, "-v", binary, "run", "--input", input_path, "--output", output_path, "--max-memory",
               "%dM" % budget_mib, "--progress", "never"] + run_options
    result, seconds = run(command)
    print(result.stdout, end="", flush=True)
    peak_match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)
    # /usr/bin/time's own lines follow the run's stderr; show the run's part on failure.
    run_stderr = result.stderr.split("\tCommand being timed:")[0].strip()
    check(result.returncode == 0, "%s: run failed (exit %d): %s" % (name, result.returncode, run_stderr))
    check(peak_match is not None, "%s: no 'Maximum resident set size' in /usr/bin/time -v's report" % name)
    if result.returncode != 0 or peak_match is None:
        return
    peak = int(peak_match.group(1)) * 1024
    units_match = re.search(r"done: (\d+) rounds", result.stdout)
    units = int(units_match.group(1)) if units_match else 0
    output_bytes = os.path.getsize(output_path) if os.path.exists(output_path) else 0
    weights_match = re.search(r"weights ([0-9.]+ [KMGT]?i?B)", result.stdout)
    print("%s: peak RSS %.1f MiB, budget %d MiB (%.0f%% of it); input %.1f MiB (%.1fx the budget), output file "
          "%.1f MiB (%.1fx), attention weights %s; %d units; run %.1f s"
          % (name, peak / MIB, budget_mib, 100.0 * peak / budget, input_bytes / MIB, input_bytes / budget,
             output_bytes / MIB, output_bytes / budget, weights_match.group(1) if weights_match else "?", units,
             seconds), flush=True)
    check(peak < budget, "%s: peak RSS %.1f MiB is not under --max-memory %d MiB" % (name, peak / MIB, budget_mib))
    check(units >= 4, "%s: the run used %d units; expected at least 4 rounds (streaming under the budget)" % (name, units))
    check(max(input_bytes, output_bytes) >= data_factor * budget,
          "%s: the data (%.1f MiB in, %.1f MiB out) is not %.1fx the budget: the test would not be meaningful"
          % (name, input_bytes / MIB, output_bytes / MIB, data_factor))
    check(not os.path.exists(output_path + ".partial"), "%s: %s.partial left behind" % (name, output_path))

    verify, seconds = run([binary, "verify", "--input", input_path, "--output", output_path, "--samples", "4"])
    print(verify.stdout, end="", flush=True)
    check(verify.returncode == 0, "%s: verify failed (exit %d): %s" % (name, verify.returncode, verify.stderr.strip()))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    binary, work = sys.argv[1], sys.argv[2]
    if not os.access(TIME, os.X_OK):
        print("FAIL: %s not found; install the Debian package `time` (scripts/install-deps.sh)" % TIME)
        return 1
    fresh_directory(work)
    try:
        for name, generate_options, run_options, budget_mib, data_factor in CASES:
            run_case(binary, work, name, generate_options, run_options, budget_mib, data_factor)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print("%d failure(s):\n  %s" % (len(failures), "\n  ".join(failures)))
        return 1
    print("memory bound: all runs under their --max-memory")
    return 0


if __name__ == "__main__":
    sys.exit(main())
