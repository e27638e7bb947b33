#!/usr/bin/python3
"""A bad value found by the rounds' reads, not by a scan before them.

usage: mpi_value_check_test.py ATTNBATCH MPIEXEC WORKDIR

For float32 input of whole sequences the values are checked as the rounds read them (no second
read of the input before the first compute). A NaN or inf in a unit that only a later round
reads must still end the run as a scan before the rounds did: exit 3 on every rank, one error
line naming the dataset and the first bad value's index, no OUTPUT and no OUTPUT.partial of a
fresh run (an existing OUTPUT under --force unchanged), and the .partial of a resumed run kept
(it holds the finished units of the valid part). Cases: padded input on 1 rank and on 2 ranks
under --io parallel and --io gather, packed input on 2 ranks, an existing OUTPUT with --force,
a resumed run.
"""
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, digest, failures, fresh_directory, mpi_env, mpirun, run_with_timeout  # noqa: E402

ENV = mpi_env()
ENV.pop("ATTNBATCH_FAULT", None)
TIMEOUT_S = 120
# Small units, so that the bad sequence is read many rounds after the first compute.
UNIT = ["--unit-sequences", "2", "--threads", "1"]


def generate(binary, path, extra):
    made = subprocess.run([binary, "generate", "--output", path, "--num-seqs", "40", "--seq-len", "16", "--dim", "8",
                           "--seed", "5", *extra], capture_output=True, text=True)
    if made.returncode != 0:
        raise SystemExit("FAIL: generate: " + made.stderr)


def run(binary, mpiexec, ranks, args, env=ENV):
    command = [binary, "run", *args] if ranks == 1 else mpirun(mpiexec, ranks, [binary, "run", *args])
    return run_with_timeout(command, TIMEOUT_S, env=env)


def expect_rejected(label, result, named, output, partial_kept=False):
    if not check(result is not None, "%s: no exit within %d s (a hang)" % (label, TIMEOUT_S)):
        return
    print("%s: exit %d; stderr: %s" % (label, result.returncode, result.stderr.strip()), flush=True)
    check(result.returncode == 3, "%s: exit %d, expected 3 (invalid input)" % (label, result.returncode))
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    check(len(errors) == 1, "%s: expected one error line, got %d" % (label, len(errors)))
    check(len(errors) == 1 and all(word in errors[0] for word in named),
          "%s: the message does not name %s: %s" % (label, named, errors))
    check(os.path.exists(output + ".partial") == partial_kept,
          "%s: %s.partial %s" % (label, output, "was removed" if partial_kept else "was left behind"))


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    binary, mpiexec, work = sys.argv[1:]
    binary = os.path.abspath(binary)
    fresh_directory(work)
    padded = os.path.join(work, "padded.h5")
    packed = os.path.join(work, "packed.h5")
    output = os.path.join(work, "out.h5")
    generate(binary, padded, ["--min-len", "4"])
    generate(binary, packed, ["--min-len", "4", "--layout", "packed"])
    with h5py.File(padded, "r+") as f:
        x = f["embeddings"]
        row = x[37]
        row[15, 6] = np.nan  # in the padding of a ragged sequence or among its tokens: both refused
        x[37] = row
        row = x[39]
        row[2, 1] = -np.inf  # a later bad value: the first one must be named
        x[39] = row
    with h5py.File(packed, "r+") as f:
        tokens = f["tokens"]
        last = tokens.shape[0] - 1
        tokens[last, 3] = np.inf
    padded_digest, packed_digest = digest(padded), digest(packed)

    for ranks, io in ((1, "auto"), (2, "parallel"), (2, "gather")):
        label = "NaN in sequence 37 of 40, %d rank(s), --io %s" % (ranks, io)
        result = run(binary, mpiexec, ranks, ["--input", padded, "--output", output, "--io", io, *UNIT])
        expect_rejected(label, result, ["/embeddings", "nan", "[37, 15, 6]"], output)
        check(not os.path.exists(output), "%s: %s exists" % (label, output))

    label = "inf in the last token of a packed input, 2 ranks"
    result = run(binary, mpiexec, 2, ["--input", packed, "--output", output, *UNIT])
    expect_rejected(label, result, ["/tokens", "inf", "[%d, 3]" % last], output)
    check(not os.path.exists(output), "%s: %s exists" % (label, output))

    # An existing OUTPUT is replaced only by a complete run.
    valid = os.path.join(work, "valid.h5")
    generate(binary, valid, ["--min-len", "4"])
    made = run(binary, mpiexec, 1, ["--input", valid, "--output", output, *UNIT])
    check(made is not None and made.returncode == 0, "a valid run failed: %s" % (made.stderr if made else "hang"))
    before = digest(output)
    label = "NaN in a later unit, 2 ranks, --force over an existing OUTPUT"
    result = run(binary, mpiexec, 2, ["--input", padded, "--output", output, "--force", *UNIT])
    expect_rejected(label, result, ["/embeddings", "nan", "[37, 15, 6]"], output)
    check(os.path.exists(output) and digest(output) == before, "%s: OUTPUT changed or vanished" % label)
    os.remove(output)

    # A run stopped before it reached the bad unit leaves a .partial; its resumption meets the
    # bad value and keeps the .partial (the finished units stay; a fixed input could not
    # resume it, as the identity changes, but the user decides what to do with it).
    label = "NaN in a later unit, a resumed run"
    killed = run(binary, mpiexec, 1, ["--input", padded, "--output", output, *UNIT],
                 env=dict(ENV, ATTNBATCH_FAULT="0:after_unit:2:kill"))
    check(killed is not None and killed.returncode != 0 and os.path.exists(output + ".partial"),
          "%s: the killed run left no .partial (exit %s)" % (label, killed.returncode if killed else "hang"))
    kept = digest(output + ".partial") if os.path.exists(output + ".partial") else None
    result = run(binary, mpiexec, 2, ["--input", padded, "--output", output, "--resume", *UNIT])
    expect_rejected(label, result, ["/embeddings", "nan", "[37, 15, 6]"], output, partial_kept=True)
    check(not os.path.exists(output), "%s: %s exists" % (label, output))
    if kept is not None and os.path.exists(output + ".partial"):
        again = run(binary, mpiexec, 1, ["--input", padded, "--output", output, "--resume", *UNIT])
        expect_rejected(label + ", twice", again, ["/embeddings", "nan", "[37, 15, 6]"], output, partial_kept=True)

    check(digest(padded) == padded_digest and digest(packed) == packed_digest, "an input changed")
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
