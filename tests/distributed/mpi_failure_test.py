#!/usr/bin/python3
"""A failure seen by one rank ends every rank with the same exit code, quickly.

usage: mpi_failure_test.py ATTNBATCH MPIEXEC WORKDIR

Under `mpirun -np 4 --io parallel` every rank scans only its own share of the input, so a NaN
placed in the last sequence is seen by rank 3 alone. Every rank must exit 3 (invalid input)
within 30 s, rank 0 must print one line naming the dataset and the index, and neither OUTPUT
nor OUTPUT.partial may exist afterwards; the input is unchanged. The same with --io gather
(rank 0 scans everything) and with a bad option value every rank parses (exit 2).
"""
import os
import subprocess
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, digest, failures, fresh_directory, mpi_env, mpirun, run_with_timeout  # noqa: E402

LIMIT = 30.0
ENV = mpi_env()
RANKS = 4


def run_everywhere(binary, mpiexec, work, label, args):
    """Runs attnbatch on RANKS ranks; each rank records its own exit code in rc.<rank>."""
    for name in os.listdir(work):
        if name.startswith("rc."):
            os.remove(os.path.join(work, name))
    wrapper = 'cd "$1" && shift && "$@"; code=$?; echo $code > rc.$OMPI_COMM_WORLD_RANK; exit $code'
    # mpirun would kill the other ranks as soon as one exits non-zero; to see what every rank
    # does by itself, it is told to wait for all of them.
    command = mpirun(mpiexec, RANKS, ["sh", "-c", wrapper, "sh", work, binary] + args,
                     options=["--mca", "orte_abort_on_non_zero_status", "0"])
    start = time.monotonic()
    result = run_with_timeout(command, 120, env=ENV)
    if result is None:
        check(False, "%s: no exit within 120 s (a hang)" % label)
        return None, None
    elapsed = time.monotonic() - start
    codes = {}
    for rank in range(RANKS):
        path = os.path.join(work, "rc.%d" % rank)
        text = open(path).read().strip() if os.path.exists(path) else ""
        codes[rank] = int(text) if text else None
    print("%s: exit codes %s in %.1f s; stderr: %s" % (label, codes, elapsed, result.stderr.strip()), flush=True)
    check(elapsed < LIMIT, "%s: took %.1f s, expected under %.0f s" % (label, elapsed, LIMIT))
    return codes, result


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    binary, mpiexec, work = sys.argv[1:]
    binary = os.path.abspath(binary)
    fresh_directory(work)
    data = os.path.join(work, "in.h5")
    output = os.path.join(work, "out.h5")
    made = subprocess.run([binary, "generate", "--output", data, "--num-seqs", "40", "--seq-len", "16", "--dim", "8"],
                          capture_output=True, text=True)
    if made.returncode != 0:
        print("FAIL: generate: " + made.stderr)
        return 1
    with h5py.File(data, "r+") as f:
        x = f["embeddings"]
        row = x[39]
        row[5, 3] = np.nan
        x[39] = row
    before = digest(data)

    for io in ("parallel", "gather"):
        label = "NaN in the last sequence, --io " + io
        codes, result = run_everywhere(binary, mpiexec, work, label,
                                       ["run", "--input", data, "--output", output, "--io", io, "--threads", "1"])
        if codes is None:
            continue
        check(all(code == 3 for code in codes.values()), "%s: exit codes %s, expected 3 on every rank" % (label, codes))
        errors = [line for line in result.stderr.splitlines() if "error" in line]
        check(len(errors) == 1, "%s: expected one error line (from rank 0), got %d" % (label, len(errors)))
        check(any("/embeddings" in line and "[39, 5, 3]" in line for line in errors),
              "%s: the message does not name /embeddings and index [39, 5, 3]: %s" % (label, errors))
        check(not os.path.exists(output), "%s: %s exists" % (label, output))
        check(not os.path.exists(output + ".partial"), "%s: %s.partial exists" % (label, output))
        check(digest(data) == before, "%s: the input changed" % label)

    label = "a bad option value on every rank"
    codes, result = run_everywhere(binary, mpiexec, work, label,
                                   ["run", "--input", data, "--output", output, "--save-weights", "some"])
    if codes is not None:
        check(all(code == 2 for code in codes.values()), "%s: exit codes %s, expected 2 on every rank" % (label, codes))
        check("--save-weights" in result.stderr, "%s: the message does not name --save-weights" % label)
        check(not os.path.exists(output), "%s: %s exists" % (label, output))

    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
