#!/usr/bin/python3
"""`run --dry-run --simulate-ranks 4096` over 10 million sequences with Zipf-distributed lengths
predicts an imbalance of at most 2%, in under 60 s (issue: distributed runs); on heavy-tailed
lengths (a Pareto law: 20,000 sequences up to L = 16,384, mean about 490, the longest over 30
times the mean), where one sequence outweighs a whole rank's share, the plan splits the long
sequences into pieces and predicts at most 2% at 512 ranks and 5% at 4096, and the plan of
10 million such sequences for 4096 ranks takes under 10 s of CPU (issue: scale past a few
dozen ranks).

usage: dry_run_scale_test.py ATTNBATCH WORKDIR

The input is [10^7, 512, 64] float32 left unallocated (a 40 MB file: only /lengths is
written, by make_zipf_input.py), so the dry run validates shapes, types and all 10^7 lengths
and plans, without scanning values. Both schedules are planned (static: the contiguous
shares a run would use; dynamic: its simulation with equally fast ranks).
"""
import os
import re
import resource
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LIMIT_SECONDS = 60.0
MAX_IMBALANCE_PERCENT = 2.0


def dry_run(binary, data, work, ranks):
    """The PLAN line's numbers and the CPU seconds of the dry run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run([binary, "run", "--input", data, "--output", os.path.join(work, "out.h5"), "--heads", "1",
                             "--dry-run", "--simulate-ranks", str(ranks)], capture_output=True, text=True,
                            timeout=2 * LIMIT_SECONDS)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    plan = re.search(r"^PLAN ranks=(\d+) units=(\d+) .*imbalance_percent=([0-9.]+).* idle_ranks=(\d+) "
                     r"largest_unit_percent=([0-9.]+) split_sequences=(\d+) pieces=(\d+)", result.stdout, re.M)
    if result.returncode != 0 or plan is None:
        return None, "exit %d, no PLAN line: %s" % (result.returncode, result.stderr.strip()), cpu
    return [float(v) for v in plan.groups()], "", cpu


def heavy_tail(binary, work, failures):
    make = os.path.join(HERE, "make_pareto_input.py")
    small, large = os.path.join(work, "pareto.h5"), os.path.join(work, "pareto10m.h5")
    subprocess.run([sys.executable, make, small, "--num-seqs", "20000", "--seq-len", "16384", "--dim", "64"], check=True)
    print("heavy tail, 20,000 sequences: ranks, units, predicted imbalance, idle ranks, largest unit's share of the "
          "critical path, split sequences, pieces")
    for ranks, limit in ((16, 2.0), (64, 2.0), (128, 2.0), (512, 2.0), (4096, 5.0)):
        numbers, error, cpu = dry_run(binary, small, work, ranks)
        if numbers is None:
            failures.append("heavy tail, %d ranks: %s" % (ranks, error))
            continue
        _, units, imbalance, idle, largest, split, pieces = numbers
        print("  %5d ranks: %6d units, imbalance %.3f%%, %d idle, largest unit %.2f%%, %d sequences split into %d pieces, "
              "%.2f s CPU" % (ranks, units, imbalance, idle, largest, split, pieces, cpu))
        if imbalance > limit:
            failures.append("heavy tail, %d ranks: predicted imbalance %.3f%% > %.1f%%" % (ranks, imbalance, limit))
        if idle > 0:
            failures.append("heavy tail, %d ranks: %d ranks get no work" % (ranks, idle))
    subprocess.run([sys.executable, make, large, "--num-seqs", "10000000", "--seq-len", "16384", "--dim", "64",
                    "--seed", "2"], check=True)
    numbers, error, cpu = dry_run(binary, large, work, 4096)
    if numbers is None:
        failures.append("heavy tail, 10^7 sequences: %s" % error)
        return
    print("  10^7 sequences, 4096 ranks: %d units, imbalance %.3f%%, largest unit %.2f%%, planned in %.2f s CPU"
          % (numbers[1], numbers[2], numbers[4], cpu))
    if cpu > 10.0:
        failures.append("heavy tail, 10^7 sequences: the dry run took %.1f s of CPU > 10 s" % cpu)
    if numbers[2] > 5.0:
        failures.append("heavy tail, 10^7 sequences: predicted imbalance %.3f%% > 5%%" % numbers[2])


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
    heavy_tail(binary, work, failures)
    shutil.rmtree(work, ignore_errors=True)
    for failure in failures:
        print("FAIL: " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
