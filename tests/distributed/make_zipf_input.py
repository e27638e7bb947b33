#!/usr/bin/python3
"""Writes a scale-test input for the planner: /embeddings float32 [N, L, d], chunked one
sequence per chunk and never written (no chunk is allocated, so the file stays small and
reads return the fill value 0), and /lengths int32 [N] from a truncated Zipf law on 1..L
(P(k) proportional to k^-exponent), drawn with a seeded numpy Generator.

    make_zipf_input.py OUT.h5 --num-seqs 10000000 --seq-len 512 --dim 64 --seed 1 --exponent 1.2

For plans (--dry-run): reading /embeddings returns zeros, so a real run on this file is
pointless and the finiteness scan would read N*L*d fill values.
"""
import argparse
import sys

import h5py
import numpy as np


def zipf_lengths(n, max_len, exponent, seed):
    """Truncated Zipf on 1..max_len by inverse CDF."""
    weights = np.arange(1, max_len + 1, dtype=np.float64) ** -exponent
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    rng = np.random.default_rng(seed)
    lengths = np.searchsorted(cdf, rng.random(n), side="right") + 1
    return np.minimum(lengths, max_len).astype(np.int32)


def write(path, n, seq_len, dim, seed, exponent):
    lengths = zipf_lengths(n, seq_len, exponent, seed)
    with h5py.File(path, "w") as f:
        # Low-level creation so that the allocation time is explicitly late: no chunk is
        # allocated until written, and nothing is written.
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((1, seq_len, dim))
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_LATE)
        dcpl.set_fill_time(h5py.h5d.FILL_TIME_IFSET)
        space = h5py.h5s.create_simple((n, seq_len, dim))
        h5py.h5d.create(f.id, b"embeddings", h5py.h5t.IEEE_F32LE, space, dcpl=dcpl)
        f.create_dataset("lengths", data=lengths, dtype=np.int32)
    return lengths


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--num-seqs", type=int, default=10_000_000)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--exponent", type=float, default=1.2)
    args = parser.parse_args(argv)
    if args.num_seqs < 1 or args.seq_len < 1 or args.dim < 1:
        parser.error("--num-seqs, --seq-len and --dim must be positive")
    if not args.exponent > 0:
        parser.error("--exponent must be positive")
    lengths = write(args.out, args.num_seqs, args.seq_len, args.dim, args.seed, args.exponent)
    print(f"{args.out}: /embeddings [{args.num_seqs}, {args.seq_len}, {args.dim}] float32 (unallocated), "
          f"/lengths mean {lengths.mean():.1f} min {lengths.min()} max {lengths.max()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
