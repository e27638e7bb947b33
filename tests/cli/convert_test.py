#!/usr/bin/python3
"""scripts/convert_to_input.py: .npy (padded with lengths, or a token matrix with offsets), .npz
(stored and compressed members, streamed) and word2vec/fastText .vec text (the vectors
themselves, or sentences looked up in them) into the input layout `run` reads, compared value
by value with what numpy says they hold; several blocks forced by a tiny --max-memory; the
packed layout; `attnbatch inspect` accepts the files and `run` runs on them; errors are one
line.

usage: convert_test.py ATTNBATCH WORKDIR
"""
import os
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from harness import check, failures, fresh_directory  # noqa: E402

SCRIPT = os.path.join(HERE, "..", "..", "scripts", "convert_to_input.py")


def convert(*args, expect=0):
    result = subprocess.run(["/usr/bin/python3", SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=120)
    check(result.returncode == expect, "convert %s: exit %d, expected %d: %s" % (" ".join(map(str, args)), result.returncode,
                                                                                 expect, result.stderr.strip()))
    if expect:
        check(len(result.stderr.strip().splitlines()) == 1, "convert %s: not one error line: %r" % (args[0], result.stderr))
    return result


def expect_input(binary, path, embeddings, lengths, label):
    with h5py.File(path, "r") as f:
        check(f["embeddings"].shape == embeddings.shape, "%s: shape %s, expected %s" % (label, f["embeddings"].shape, embeddings.shape))
        if f["embeddings"].shape == embeddings.shape:
            check(np.array_equal(f["embeddings"][()], embeddings.astype(np.float32)), "%s: /embeddings differ" % label)
        check(np.array_equal(f["lengths"][()], lengths), "%s: /lengths %s, expected %s" % (label, f["lengths"][()], lengths))
    result = subprocess.run([binary, "inspect", path], capture_output=True, text=True, timeout=60)
    check(result.returncode == 0, "%s: inspect exit %d: %s" % (label, result.returncode, result.stdout[-300:]))


def padded_from(tokens, offsets, length):
    n, d = len(offsets) - 1, tokens.shape[1]
    out = np.zeros((n, length, d), dtype=np.float32)
    for s in range(n):
        m = min(offsets[s + 1] - offsets[s], length)
        out[s, :m] = tokens[offsets[s]:offsets[s] + m]
    return out


def main():
    binary, work = sys.argv[1], sys.argv[2]
    fresh_directory(work)
    rng = np.random.default_rng(2)
    n, length, d = 9, 12, 8
    lengths = rng.integers(0, length + 1, n).astype(np.int32)
    x = rng.standard_normal((n, length, d)).astype(np.float32)
    expected = x.copy()
    expected[np.arange(length)[None, :] >= lengths[:, None]] = 0  # whatever padding held, it is written as zeros
    p = lambda name: os.path.join(work, name)  # noqa: E731
    np.save(p("x.npy"), x)
    np.save(p("len.npy"), lengths)
    convert(p("x.npy"), p("a.h5"), "--lengths", p("len.npy"), "--max-memory", "1K")
    expect_input(binary, p("a.h5"), expected, lengths, "npy padded + lengths, blocks of one sequence")
    np.savez_compressed(p("x.npz"), embeddings=x.astype(np.float64), lengths=lengths)
    convert(p("x.npz"), p("b.h5"), "--max-memory", "2K")
    expect_input(binary, p("b.h5"), expected, lengths, "npz (compressed, streamed) padded + lengths")

    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = rng.standard_normal((int(offsets[-1]), d)).astype(np.float32)
    np.savez(p("t.npz"), tokens=tokens, offsets=offsets)
    convert(p("t.npz"), p("c.h5"), "--array", "tokens", "--max-memory", "1K")
    expect_input(binary, p("c.h5"), padded_from(tokens, offsets, int(lengths.max())), lengths, "npz token matrix + offsets")
    np.save(p("t.npy"), tokens)
    np.save(p("o.npy"), offsets)
    result = convert(p("t.npy"), p("d.h5"), "--offsets", p("o.npy"), "--seq-len", 5)
    cut = np.minimum(lengths, 5)
    expect_input(binary, p("d.h5"), padded_from(tokens, offsets, 5), cut, "npy token matrix cut to --seq-len 5")
    check("%d sequences cut" % np.count_nonzero(lengths > 5) in result.stdout, "no note of the cut: " + result.stdout)
    convert(p("t.npy"), p("e.h5"), "--offsets", p("o.npy"), "--layout", "packed")
    with h5py.File(p("e.h5"), "r") as f:
        check(np.array_equal(f["tokens"][()], tokens) and np.array_equal(f["offsets"][()], offsets),
              "packed layout: /tokens or /offsets differ")
        check(f["offsets"].dtype == np.int64, "packed /offsets is %s, expected int64" % f["offsets"].dtype)

    words = ["w%d" % i for i in range(10)]
    vectors = rng.standard_normal((10, 4))
    with open(p("v.vec"), "w") as f:
        f.write("10 4\n")
        for w, v in zip(words, vectors):
            f.write(w + " " + " ".join("%.6f" % value for value in v) + "\n")
    rounded = np.array([[float("%.6f" % value) for value in v] for v in vectors])
    convert(p("v.vec"), p("f.h5"), "--seq-len", 4)
    grouped = np.zeros((3, 4, 4))
    grouped.reshape(12, 4)[:10] = rounded
    expect_input(binary, p("f.h5"), grouped, np.array([4, 4, 2], dtype=np.int32), ".vec vectors in sequences of 4")
    with h5py.File(p("f.h5"), "r") as f:
        check([w.decode() for w in f["words"][2]] == ["w8", "w9", "", ""], ".vec /words: %r" % f["words"][2])
    with open(p("s.txt"), "w") as f:
        f.write("w1 w2 w3\nw9 nope w0\n\nw5\n")
    result = convert(p("v.vec"), p("g.h5"), "--sentences", p("s.txt"))
    sentences = np.zeros((4, 3, 4))
    sentences[0] = rounded[[1, 2, 3]]
    sentences[1, :2] = rounded[[9, 0]]
    sentences[3, 0] = rounded[5]
    expect_input(binary, p("g.h5"), sentences, np.array([3, 2, 0, 1], dtype=np.int32), ".vec looked up by sentences")
    check("1 distinct words without a vector" in result.stdout, "unknown words not reported: " + result.stdout)
    run = subprocess.run([binary, "run", "--input", p("g.h5"), "--output", p("g_out.h5")], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    check(run.returncode == 0, "run on a converted file: " + run.stderr)

    convert(p("v.vec"), p("h.h5"), "--sentences", p("s.txt"), "--unknown", "error", expect=2)
    convert(p("t.npy"), p("h.h5"), expect=2)          # a token matrix without --offsets
    convert(p("x.npy"), p("a.h5"), expect=2)          # exists, no --force
    np.save(p("bad_len.npy"), np.full(n, length + 1))
    convert(p("x.npy"), p("h.h5"), "--lengths", p("bad_len.npy"), expect=2)
    check(not os.path.exists(p("h.h5")) and not os.path.exists(p("h.h5.partial")), "a refused conversion left a file")
    print("convert: %d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
