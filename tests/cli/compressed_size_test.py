"""A compressed output is never larger than the same run's uncompressed one, but for a few
bytes per chunk (`compressed_size_test.py ATTNBATCH WORKDIR CASE`).

Each case runs one input twice, with `--compression none` and `--compression gzip:1`, and
compares the files' sizes. The data are standard-normal float32: shuffle and deflate shrink
such values a little (their exponent bytes) and grow none by more than deflate's framing (a
zlib header, an Adler-32 and a stored block's header: 11 bytes) plus the chunk's entry in the
chunk index (a B-tree key and address: at most 40 bytes at rank 4), so the gzip file is at most
64 bytes per chunk larger unless it keeps old copies of its chunks. That is what it did when
steps were smaller than chunks: every step that wrote part of a compressed chunk wrote the
whole chunk again to new file space, and the old space is never reused (a kill must leave the
chunks of the last checkpoint whole). With 1 MiB chunks and a step per sequence, 600
sequences of 16 x 16 gave a file of 200 MB.

  padded         a default run (8 rounds, steps of 75 sequences against chunks of 600)
  one_per_step   --unit-sequences 1: a step, a round and a checkpoint per sequence
  packed_ranks   the packed layout with ragged lengths and mean maps, on two ranks
Both outputs must also hold the same datasets (`verify` passes and the values are equal).
"""
import os
import sys

import h5py
import numpy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from command_cases import ENV, TIMEOUT, Context, run_case  # noqa: E402
from harness import check, mpirun, run_with_timeout  # noqa: E402


def compare_sizes(ctx, input_name, options, mpiexec=None):
    sizes = {}
    for compression in ("none", "gzip:1"):
        output = ctx.path("out_%s.h5" % compression.replace(":", ""))
        args = ["run", "--input", ctx.path(input_name), "--output", output, "--compression", compression, *options]
        if mpiexec:
            done = run_with_timeout(mpirun(mpiexec, 2, [ctx.binary, *args, "--threads", "1"]), TIMEOUT, cwd=ctx.work,
                                    env=ENV)
            check(done is not None, "mpirun run %s: no exit within %d s" % (compression, TIMEOUT))
            if done is None:
                return
        else:
            done = ctx.run(*args)
        check(done.returncode == 0, "run %s: exit %d, %r" % (compression, done.returncode, done.stderr[-500:]))
        if done.returncode != 0:
            return
        sizes[compression] = os.path.getsize(output)
        ctx.ok("verify", "--input", ctx.path(input_name), "--output", output)
    with h5py.File(ctx.path("out_gzip1.h5"), "r") as packed:
        chunks = sum(packed[name].id.get_num_chunks() for name in ("output", "lse", "lengths", "attention") if name in packed)
    check(sizes["gzip:1"] <= sizes["none"] + 64 * chunks,
          "gzip output %d bytes, uncompressed %d, %d chunks: the compressed file keeps rewritten chunks"
          % (sizes["gzip:1"], sizes["none"], chunks))
    with h5py.File(ctx.path("out_none.h5"), "r") as plain, h5py.File(ctx.path("out_gzip1.h5"), "r") as packed:
        for name in ("output", "lse", "lengths", "attention"):
            if name in plain:
                check(numpy.array_equal(plain[name][...], packed[name][...], equal_nan=True),
                      "/%s differs between the compressed and the uncompressed output" % name)
    print("sizes: none %d, gzip:1 %d, %d chunks" % (sizes["none"], sizes["gzip:1"], chunks))


def case_padded(ctx):
    ctx.generate("in.h5", "--num-seqs", "600", "--seq-len", "16", "--dim", "16")
    compare_sizes(ctx, "in.h5", [])


def case_one_per_step(ctx):
    ctx.generate("in.h5", "--num-seqs", "600", "--seq-len", "16", "--dim", "16", "--min-len", "4")
    compare_sizes(ctx, "in.h5", ["--unit-sequences", "1"])


def case_packed_ranks(ctx):
    ctx.generate("in.h5", "--num-seqs", "400", "--seq-len", "48", "--dim", "16", "--heads", "2", "--min-len", "1",
                 "--layout", "packed")
    compare_sizes(ctx, "in.h5", ["--dataset", "/tokens", "--heads", "2", "--save-weights", "mean"],
                  mpiexec=os.environ["MPIEXEC"])


CASES = {"padded": case_padded, "one_per_step": case_one_per_step, "packed_ranks": case_packed_ranks}

if __name__ == "__main__":
    sys.exit(run_case(__doc__, CASES))
