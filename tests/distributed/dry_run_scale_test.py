#!/usr/bin/python3
"""`run --dry-run --simulate-ranks 4096` over 10 million sequences with Zipf-distributed lengths
predicts an imbalance of at most 2%, in under 60 s (issue: distributed runs).

usage: dry_run_scale_test.py ATTNBATCH WORKDIR

The input is [10^7, 512, 64] float32 left unallocated (a 40 MB file: only /lengths is
written, by make_zipf_input.py), so the dry run validates shapes, types and all 10^7 lengths
and plans, without scanning values. Both schedules are planned (static: the contiguous
shares a run would use; dynamic: its simulation with equally fast ranks).
"""
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LIMIT_SECONDS = 60.0
MAX_IMBALANCE_PERCENT = 2.0


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    binary, work = sys.argv[1:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    data = os.path.join(work, "zipf.h5")
    subprocess.run([sys.executable, os.path.join(HERE, "make_zipf_input.py"), data, "--num-seqs", "10000000",
                    "--seq-len", "512", "--dim", "64", "--seed", "1", "--exponent", "1.2"], check=True)
    failures = []
    for schedule in ("static", "dynamic"):
        start = time.monotonic()
        result = subprocess.run([binary, "run", "--input", data, "--output", os.path.join(work, "out.h5"), "--heads", "4",
                                 "--dry-run", "--simulate-ranks", "4096", "--schedule", schedule],
                                capture_output=True, text=True, timeout=2 * LIMIT_SECONDS)
        elapsed = time.monotonic() - start
        print(result.stdout, end="")
        plan = re.search(r"^PLAN ranks=(\d+) units=(\d+) .*imbalance_percent=([0-9.]+)", result.stdout, re.M)
        if result.returncode != 0 or plan is None:
            failures.append("%s: exit %d, no PLAN line: %s" % (schedule, result.returncode, result.stderr.strip()))
            continue
        ranks, units, imbalance = int(plan.group(1)), int(plan.group(2)), float(plan.group(3))
        print("%s: %d ranks, %d units, predicted imbalance %.3f%%, %.1f s" % (schedule, ranks, units, imbalance, elapsed))
        if ranks != 4096:
            failures.append("%s: planned for %d ranks, expected 4096" % (schedule, ranks))
        if imbalance > MAX_IMBALANCE_PERCENT:
            failures.append("%s: predicted imbalance %.3f%% > %.1f%%" % (schedule, imbalance, MAX_IMBALANCE_PERCENT))
        if elapsed > LIMIT_SECONDS:
            failures.append("%s: took %.1f s > %.0f s" % (schedule, elapsed, LIMIT_SECONDS))
        if os.path.exists(os.path.join(work, "out.h5")) or os.path.exists(os.path.join(work, "out.h5.partial")):
            failures.append("%s: a dry run wrote an output" % schedule)
    shutil.rmtree(work, ignore_errors=True)
    for failure in failures:
        print("FAIL: " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
