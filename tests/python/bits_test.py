#!/usr/bin/python3
"""attnbatch.attention gives the bits of `attnbatch run` on the same data and options, and
attnbatch.run() writes the datasets the command writes.

usage: bits_test.py ATTNBATCH WORKDIR

Each case writes its arrays into an input file (and a weights file) with h5py, runs the
command on it, and compares /output, /lse and /attention byte for byte with what
attention() returns for the arrays themselves: embeddings with H=4, causal, ragged lengths
and f32 maps; Q/K/V with grouped K/V heads, a scale and f16 mean maps; projections with
biases, w_o and rotary embeddings, given as a weights file and as a dict; bf16 where this CPU
has it. Then the same run from Python, and attention() on 1 and 2 threads.
"""
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, exit_status, fresh_directory  # noqa: E402

import attnbatch  # noqa: E402

N, L, H, D = 5, 80, 4, 64
LENGTHS = np.array([80, 3, 0, 41, 79], dtype=np.int32)


def command(binary, *args):
    result = subprocess.run([binary, "run", *args], capture_output=True, text=True, timeout=300)
    check(result.returncode == 0, f"attnbatch run {' '.join(args)}: exit {result.returncode}: {result.stderr.strip()}")


def datasets(path):
    with h5py.File(path, "r") as f:
        return {name: f[name][()] for name in ("output", "lse", "lengths", "attention") if name in f}


def same_bits(name, ours, stored):
    ours = np.ascontiguousarray(ours)
    equal = ours.shape == stored.shape and ours.dtype == stored.dtype and ours.tobytes() == stored.tobytes()
    check(equal, f"{name}: attention() differs from the run's file ({ours.shape} {ours.dtype} vs "
                 f"{stored.shape} {stored.dtype})")
    return equal


def main():
    binary, work = sys.argv[1], sys.argv[2]
    fresh_directory(work)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((N, L, D), dtype=np.float32)
    dk, groups, dv = D // H, 2, 24
    q = rng.standard_normal((N, L, H * dk), dtype=np.float32)
    k = rng.standard_normal((N, L, groups * dk), dtype=np.float32)
    v = rng.standard_normal((N, L, groups * dv), dtype=np.float32)
    proj = {"w_q": rng.standard_normal((D, H * dk)), "w_k": rng.standard_normal((D, groups * dk)),
            "w_v": rng.standard_normal((D, groups * dv)), "w_o": rng.standard_normal((H * dv, 48)),
            "b_q": rng.standard_normal(H * dk), "b_k": rng.standard_normal(groups * dk),
            "b_v": rng.standard_normal(groups * dv), "b_o": rng.standard_normal(48)}
    proj = {name: (a * 0.125).astype(np.float32) for name, a in proj.items()}
    source = os.path.join(work, "in.h5")
    with h5py.File(source, "w") as f:
        f["embeddings"] = x
        f["lengths"] = LENGTHS
        f["q"], f["k"], f["v"] = q, k, v
    weights = os.path.join(work, "weights.h5")
    with h5py.File(weights, "w") as f:
        for name, a in proj.items():
            f[name] = a
        f.attrs["heads"] = H

    # Embeddings, H=4, causal, ragged, f32 maps.
    out = os.path.join(work, "a.h5")
    command(binary, "--input", source, "--output", out, "--heads", "4", "--causal", "--save-weights", "all")
    stored = datasets(out)
    y, lse, maps = attnbatch.attention(x, heads=H, causal=True, lengths=LENGTHS, return_lse=True, return_maps="all")
    same_bits("embeddings /output", y, stored["output"])
    same_bits("embeddings /lse", lse, stored["lse"])
    same_bits("embeddings /attention", maps, stored["attention"])

    # Q/K/V with G=2, a scale, f16 mean maps.
    out = os.path.join(work, "b.h5")
    command(binary, "--input", source, "--output", out, "--query", "q", "--key", "k", "--value", "v", "--heads", "4",
            "--kv-heads", "2", "--scale", "0.3", "--save-weights", "mean", "--weights-dtype", "f16")
    stored = datasets(out)
    y, lse, maps = attnbatch.attention(q, k, v, heads=H, kv_heads=groups, scale=0.3, lengths=LENGTHS, return_lse=True,
                                       return_maps="mean", maps_dtype="float16")
    same_bits("GQA /output", y, stored["output"])
    same_bits("GQA /lse", lse, stored["lse"])
    same_bits("GQA /attention (f16 mean)", maps, stored["attention"])

    # Projections with biases and w_o, rotary embeddings: a weights file and the same as a dict.
    out = os.path.join(work, "c.h5")
    command(binary, "--input", source, "--output", out, "--weights", weights, "--rope-theta", "10000", "--causal",
            "--save-weights", "none")
    stored = datasets(out)
    from_file = attnbatch.attention(x, lengths=LENGTHS, projections=weights, rope_theta=10000, causal=True)
    from_dict = attnbatch.attention(x, heads=H, lengths=LENGTHS, projections=proj, rope_theta=10000, causal=True)
    same_bits("projections (weights file) /output", from_file, stored["output"])
    same_bits("projections (dict) /output", from_dict, stored["output"])

    # bf16, where the CPU has it.
    try:
        y = attnbatch.attention(x, heads=H, lengths=LENGTHS, precision="bf16")
    except attnbatch.UsageError as e:
        print(f"bf16 case skipped: {e}")
    else:
        out = os.path.join(work, "d.h5")
        command(binary, "--input", source, "--output", out, "--heads", "4", "--precision", "bf16", "--save-weights", "none")
        same_bits("bf16 /output", y, datasets(out)["output"])

    # The same run from Python: the same datasets as the command's.
    out = os.path.join(work, "e.h5")
    attnbatch.run(source, out, query="q", key="k", value="v", heads=4, kv_heads=2, scale=0.3, save_weights="mean",
                  weights_dtype="f16", progress="never")
    ours, theirs = datasets(out), datasets(os.path.join(work, "b.h5"))
    for name in theirs:
        same_bits("run() /" + name, ours[name], theirs[name])

    # Threads do not change the bits.
    one = attnbatch.attention(x, heads=H, causal=True, lengths=LENGTHS, threads=1)
    two = attnbatch.attention(x, heads=H, causal=True, lengths=LENGTHS, threads=2)
    check(one.tobytes() == two.tobytes(), "threads=1 and threads=2 differ")
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
