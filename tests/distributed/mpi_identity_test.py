#!/usr/bin/python3
"""The same input and options give byte-identical /output, /attention, /lse and /lengths
whatever the number of ranks, the io mode and the schedule (docs/formats.md, Guarantees).

usage: mpi_identity_test.py ATTNBATCH MPIEXEC CASE WORKDIR

For one input CASE, a plain one-process run is the reference; then `mpirun -np P` for P in
1..4 with --io gather|parallel and --schedule static|dynamic, each under a timeout, must
exit 0, leave no OUTPUT.partial, set complete = 1 and store the same bytes (not values
within a tolerance: bytes). Small --unit-sequences force several rounds per rank.

The split_* cases have a few sequences far longer than the rest: on two ranks and more the
plan cuts them into pieces of query rows computed on different ranks (checked in the printed
plan), in the padded layout (with projections, and compressed), the packed one, and Q/K/V
split by head.
"""
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, failures, fresh_directory, mpi_env, mpirun, run_with_timeout, skip  # noqa: E402

TIMEOUT = 120
ENV = mpi_env()

HERE = os.path.dirname(os.path.abspath(__file__))

# name: (generate options, run options, lengths: None as generated, "zipf" or "long" rewritten;
# "pareto": the input is make_pareto_input.py's, packed, and the generate options are its)
CASES = {
    # N < P for P = 4; projections with w_o and biases; every map stored as f32.
    "fewer_sequences_than_ranks": (
        ["--num-seqs", "3", "--seq-len", "32", "--dim", "16", "--heads", "2", "--weights-out", "{w}"],
        ["--heads", "2", "--weights", "{w}", "--save-weights", "all"], False),
    # N = P for P = 4; causal, maps as f16.
    "as_many_sequences_as_ranks": (
        ["--num-seqs", "4", "--seq-len", "48", "--dim", "32", "--min-len", "1"],
        ["--heads", "4", "--causal", "--save-weights", "all", "--weights-dtype", "f16"], False),
    # N not divisible by 2, 3 or 4; ragged lengths including 0; mean maps of a range only.
    "not_divisible": (
        ["--num-seqs", "37", "--seq-len", "64", "--dim", "32", "--min-len", "0"],
        ["--heads", "2", "--save-weights", "mean", "--weights-seqs", "5:20", "--unit-sequences", "3"], False),
    # Grouped-query attention (H = 8 query heads on G = 2 K/V heads, from the weights file's
    # attributes) with rotary embeddings, causal, every map stored.
    "grouped_query_rope": (
        ["--num-seqs", "23", "--seq-len", "40", "--dim", "64", "--heads", "8", "--kv-heads", "2", "--min-len", "1",
         "--weights-out", "{w}"],
        ["--weights", "{w}", "--causal", "--rope-theta", "10000", "--save-weights", "all", "--unit-sequences", "3"], False),
    # Skewed lengths (most sequences short, a few full), packed Q/K/V, gzip output.
    "skewed_lengths": (
        ["--num-seqs", "61", "--seq-len", "96", "--dim", "32", "--qkv", "--heads", "2", "--min-len", "1"],
        ["--query", "/query", "--key", "/key", "--value", "/value", "--heads", "2", "--save-weights", "none",
         "--compression", "gzip:1", "--unit-sequences", "4"], "zipf"),
    # A few long sequences among short ones, causal, projections with w_o, every map stored.
    "split_padded": (
        ["--num-seqs", "30", "--seq-len", "384", "--dim", "16", "--heads", "2", "--min-len", "1", "--weights-out", "{w}"],
        ["--heads", "2", "--weights", "{w}", "--causal", "--save-weights", "all"], "long"),
    # The same split, compressed, with every map: the collective writes of a rank writing a
    # piece must meet those of a rank writing whole sequences dataset for dataset.
    "split_padded_gzip": (
        ["--num-seqs", "24", "--seq-len", "256", "--dim", "16", "--heads", "2", "--min-len", "1"],
        ["--heads", "2", "--save-weights", "all", "--compression", "gzip:1"], "long"),
    # The packed layout from a Pareto tail, head-mean maps as f16.
    "split_packed": (
        ["--num-seqs", "200", "--seq-len", "640", "--dim", "16", "--xm", "6", "--alpha", "1.3", "--longest", "3",
         "--layout", "packed", "--values", "--seed", "3"],
        ["--heads", "2", "--save-weights", "mean", "--weights-dtype", "f16"], "pareto"),
    # The packed layout compressed, every map: /offsets, written at the collective creation,
    # is compressed too.
    "packed_gzip": (
        ["--num-seqs", "40", "--seq-len", "120", "--dim", "16", "--heads", "2", "--layout", "packed", "--min-len", "1"],
        ["--dataset", "/tokens", "--heads", "2", "--save-weights", "all", "--compression", "gzip:1", "--unit-sequences", "3"],
        False),
    # Q, K, V split by head [N, H, L, d], causal, maps of some sequences only.
    "split_qkv_heads": (
        ["--num-seqs", "24", "--seq-len", "320", "--qkv", "--qkv-layout", "split", "--heads", "2", "--head-dim", "8",
         "--min-len", "1"],
        ["--query", "/query", "--key", "/key", "--value", "/value", "--causal", "--weights-seqs", "2:20"], "long"),
    # --precision bf16: the same bits for any ranks, io mode and schedule within the mode too;
    # projections, causal, ragged lengths including 0, every map stored, several units per rank.
    "bf16": (
        ["--num-seqs", "23", "--seq-len", "80", "--dim", "48", "--heads", "2", "--min-len", "0", "--weights-out", "{w}"],
        ["--heads", "2", "--weights", "{w}", "--causal", "--precision", "bf16", "--save-weights", "all",
         "--unit-sequences", "3"], False),
}

BF16_MISSING = "this CPU has neither AMX-BF16 nor AVX512-BF16"


def bf16_refused(binary, data, work):
    """On a CPU without bf16 arithmetic, a bf16 run must end with the one-line usage error."""
    probe = run_with_timeout([binary, "bench", "--precision", "bf16", "--batch", "1", "--heads", "1", "--seq-len", "16",
                              "--dim", "16", "--repeats", "1", "--json"], TIMEOUT, env=ENV)
    if probe is not None and probe.returncode == 0:
        return False
    result = run_with_timeout([binary, "run", "--input", data, "--precision", "bf16", "--output",
                               os.path.join(work, "refused.h5")], TIMEOUT, env=ENV)
    check(result is not None and result.returncode == 2 and BF16_MISSING in result.stderr,
          "bf16 unavailable here, but run --precision bf16 did not exit 2 naming it: %s" % (result.stderr if result else "timeout"))
    return True

def skew_lengths(path):
    """Zipf-like lengths: many short sequences and a few at full length."""
    with h5py.File(path, "r+") as f:
        n = f["lengths"].shape[0]
        length = f["query"].shape[1]
        rng = np.random.default_rng(7)
        values = np.minimum(rng.zipf(1.6, n), length).astype(np.int32)
        values[::17] = length
        f["lengths"][...] = values


def long_lengths(path):
    """Short sequences (1 to 40 tokens) and three at or near full length: on two ranks and more,
    each of those outweighs a thirty-second of a rank's share."""
    with h5py.File(path, "r+") as f:
        data = f["query"] if "query" in f else f["embeddings"]
        length = data.shape[2] if len(data.shape) == 4 else data.shape[1]
        n = f["lengths"].shape[0]
        values = (np.arange(n) * 7 % 40 + 1).astype(np.int32)
        values[[2, n // 2, n - 1]] = [length, length - 45, length - 3]
        f["lengths"][...] = values


def compare(reference, candidate, label):
    with h5py.File(reference, "r") as ref, h5py.File(candidate, "r") as out:
        check(int(out.attrs["complete"]) == 1, "%s: complete is not 1" % label)
        for name in ("output", "attention", "lse", "lengths"):
            if name not in ref:
                check(name not in out, "%s: /%s present, absent in the reference" % (label, name))
                continue
            a, b = ref[name][()], out[name][()]
            same = a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
            if not same and a.shape == b.shape:
                differing = int(np.count_nonzero(a.view(np.uint8) != b.view(np.uint8)))
                check(False, "%s: /%s differs from the one-rank run in %d bytes" % (label, name, differing))
            else:
                check(same, "%s: /%s has dtype/shape %s%s, expected %s%s" % (label, name, b.dtype, b.shape, a.dtype, a.shape))


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    binary, mpiexec, case, work = sys.argv[1:]
    generate_options, run_options, skewed = CASES[case]
    fresh_directory(work)
    data, weights = os.path.join(work, "in.h5"), os.path.join(work, "w.h5")
    fill = lambda options: [o.replace("{w}", weights) for o in options]
    if skewed == "pareto":
        made = run_with_timeout([sys.executable, os.path.join(HERE, "make_pareto_input.py"), data] + generate_options,
                                TIMEOUT, env=ENV)
    else:
        made = run_with_timeout([binary, "generate", "--output", data, "--seed", "11"] + fill(generate_options), TIMEOUT,
                                env=ENV)
    if made is None or made.returncode != 0:
        print("FAIL: generate: %s" % (made.stderr if made else "timed out"))
        return 1
    if skewed == "zipf":
        skew_lengths(data)
    elif skewed == "long":
        long_lengths(data)
    common = ["run", "--input", data, "--threads", "1"] + fill(run_options)
    if "bf16" in run_options and bf16_refused(binary, data, work):
        skip("%s: this CPU computes no bf16 (only the refusal of --precision bf16 was checked)" % case)

    reference = os.path.join(work, "reference.h5")
    result = run_with_timeout([binary] + common + ["--output", reference], TIMEOUT, env=ENV)
    if result is None or result.returncode != 0:
        print("FAIL: reference run: %s" % (result.stderr if result else "timed out"))
        return 1

    runs = 0
    for ranks in (1, 2, 3, 4):
        for io in ("gather", "parallel"):
            for schedule in ("static", "dynamic"):
                if ranks == 1 and schedule == "dynamic":
                    continue  # one rank: the two schedules are the same code path as static
                label = "%s np=%d io=%s schedule=%s" % (case, ranks, io, schedule)
                output = os.path.join(work, "np%d_%s_%s.h5" % (ranks, io, schedule))
                result = run_with_timeout(mpirun(mpiexec, ranks, [binary] + common +
                                                 ["--output", output, "--io", io, "--schedule", schedule]), TIMEOUT, env=ENV)
                runs += 1
                if result is None:
                    check(False, "%s: no exit within %d s" % (label, TIMEOUT))
                    continue
                check(result.returncode == 0, "%s: exit %d: %s" % (label, result.returncode, result.stderr.strip()[-400:]))
                if result.returncode != 0:
                    continue
                check(not os.path.exists(output + ".partial"), "%s: %s.partial left behind" % (label, output))
                check(("PERFORMANCE ranks=%d " % ranks) in result.stdout, "%s: no PERFORMANCE line for %d ranks" % (label, ranks))
                if case.startswith("split_") and ranks > 1:
                    check("long sequences split into" in result.stdout, "%s: the plan split no sequence" % label)
                compare(reference, output, label)
                os.remove(output)
    print("%s: %d runs compared byte for byte with the one-process run, %d failure(s)" % (case, runs, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
