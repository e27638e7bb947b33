#!/usr/bin/python3
"""Writes a heavy-tailed input: lengths from a Pareto law (most sequences short, a few very
long), in the padded layout (/embeddings float32 [N, L, d] and /lengths int32 [N]) or the
packed one (/tokens float32 [T, d] and /offsets int64 [N+1]).

    make_pareto_input.py OUT.h5 --num-seqs 20000 --seq-len 16384 --dim 64 --xm 175 --alpha 1.5
    make_pareto_input.py OUT.h5 --num-seqs 1000 --seq-len 2048 --dim 32 --xm 24 --layout packed --values

Length n = min(L, ceil(xm * U^(-1/alpha))) with U uniform in (0, 1] from a seeded numpy
Generator; --longest K sets the K longest sequences to exactly L (so that a small set still
has its tail). With the defaults the mean is about 490 and the longest sequences are L, over
30 times the mean.

Without --values the data dataset is chunked and never written: no chunk is allocated, so
the file stays small and reads return the fill value 0. Such a file is for planning
(--dry-run); a real run on it computes attention of zeros. With --values every valid token
gets standard-normal values (padding rows stay zero), seeded.
"""
import argparse
import sys

import h5py
import numpy as np


def pareto_lengths(n, max_len, xm, alpha, longest, seed):
    rng = np.random.default_rng(seed)
    u = 1.0 - rng.random(n)  # (0, 1]
    lengths = np.minimum(np.ceil(xm * u ** (-1.0 / alpha)), max_len).astype(np.int32)
    if longest > 0:
        lengths[np.argsort(-lengths, kind="stable")[:longest]] = max_len
    return lengths


def lazy_dataset(f, name, shape, chunks):
    """A float32 dataset whose chunks are allocated only when written (and none is)."""
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk(chunks)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_LATE)
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_IFSET)
    h5py.h5d.create(f.id, name.encode(), h5py.h5t.IEEE_F32LE, h5py.h5s.create_simple(shape), dcpl=dcpl)
    return f[name]


def write(args):
    lengths = pareto_lengths(args.num_seqs, args.seq_len, args.xm, args.alpha, args.longest, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    with h5py.File(args.out, "w") as f:
        f.attrs["format"] = "attnbatch-input"
        f.attrs["generator"] = "make_pareto_input.py"
        if args.layout == "packed":
            offsets = np.zeros(args.num_seqs + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            tokens = int(offsets[-1])
            rows = max(1, min(tokens, (1 << 20) // (4 * args.dim)))
            data = lazy_dataset(f, "tokens", (tokens, args.dim), (rows, args.dim))
            f.create_dataset("offsets", data=offsets)
            f.attrs["sequence_layout"] = "packed"
            if args.values:
                for begin in range(0, tokens, rows):
                    end = min(tokens, begin + rows)
                    data[begin:end] = rng.standard_normal((end - begin, args.dim), dtype=np.float32)
        else:
            data = lazy_dataset(f, "embeddings", (args.num_seqs, args.seq_len, args.dim),
                                (1, min(args.seq_len, max(1, (1 << 20) // (4 * args.dim))), args.dim))
            f.create_dataset("lengths", data=lengths)
            if args.values:
                for n, length in enumerate(lengths):
                    data[n, :length] = rng.standard_normal((int(length), args.dim), dtype=np.float32)
    return lengths


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--num-seqs", type=int, default=20_000)
    parser.add_argument("--seq-len", type=int, default=16_384, help="L, the longest length")
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--xm", type=float, default=175.0, help="the Pareto scale: the shortest length")
    parser.add_argument("--alpha", type=float, default=1.5, help="the Pareto shape: smaller is heavier")
    parser.add_argument("--longest", type=int, default=0, help="set this many of the longest sequences to L")
    parser.add_argument("--layout", choices=("padded", "packed"), default="padded")
    parser.add_argument("--values", action="store_true", help="write standard-normal values (default: none)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.num_seqs < 1 or args.seq_len < 1 or args.dim < 1 or not args.xm > 0 or not args.alpha > 0:
        parser.error("--num-seqs, --seq-len, --dim, --xm and --alpha must be positive")
    lengths = write(args)
    print(f"{args.out}: {args.layout}, N={args.num_seqs} L={args.seq_len} d={args.dim}, lengths mean "
          f"{lengths.mean():.1f} median {np.median(lengths):.0f} max {lengths.max()} ({lengths.max() / lengths.mean():.1f}x "
          f"the mean), T={int(lengths.sum())}, {'values' if args.values else 'no values (unallocated)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
