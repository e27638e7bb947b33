#!/usr/bin/python3
"""split_shards.py - cut one attnbatch input into K shards for an array job.

    jobs/tools/split_shards.py INPUT.h5 K [OUTDIR] [--list LIST] [--files]

Shard k is the block of sequences [k*N/K, (k+1)*N/K) (zero-based, the end excluded): K nearly
equal, contiguous blocks. The shard list (LIST, default OUTDIR/shards.txt, OUTDIR default
".") gets one line per shard, "A:B INPUT" with INPUT's absolute path, which the array scripts
turn into `attnbatch run --input INPUT --sequences A:B`: no data is copied.

--files instead copies each block into OUTDIR/NAME.shard-k.h5 (every dataset whose first axis
has N entries is cut, everything else and all attributes are copied; the root attribute
first_sequence records the block's offset) and lists those files, one per line: for sites that
must move shards to where they run. Copies go slab by slab, so memory stays bounded whatever N
is. Needs h5py (Debian's python3-h5py, hence /usr/bin/python3).

Blocks are printed as attnbatch prints them, half-open: "shard 0: sequences [0, 4) of in.h5".
"""
import argparse
import os
import sys

import h5py

SLAB_BYTES = 64 << 20


def sequence_count(f, preferred=("/embeddings", "/query", "/lengths")):
    for name in preferred:
        if name in f and isinstance(f[name], h5py.Dataset) and f[name].ndim >= 1:
            return f[name].shape[0]
    raise SystemExit(f"split_shards: {f.filename}: no /embeddings, /query or /lengths to count sequences by")


def copy_attrs(src, dst):
    for key, value in src.attrs.items():
        dst.attrs[key] = value


def copy_slice(src, dst_file, name, first, last):
    shape = (last - first,) + src.shape[1:]
    dst = dst_file.create_dataset(name, shape=shape, dtype=src.dtype)
    copy_attrs(src, dst)
    row_bytes = max(1, src.dtype.itemsize * int(max(1, src.size // max(1, src.shape[0]))))
    step = max(1, SLAB_BYTES // row_bytes)
    for a in range(first, last, step):
        b = min(last, a + step)
        dst[a - first:b - first] = src[a:b]


def write_file_shard(src, n, path, first, last):
    datasets = []
    src.visititems(lambda name, obj: datasets.append(name) if isinstance(obj, h5py.Dataset) else None)
    with h5py.File(path, "w") as dst:
        copy_attrs(src, dst)
        dst.attrs["first_sequence"] = first
        for name in datasets:
            ds = src[name]
            if ds.ndim >= 1 and ds.shape[0] == n:
                copy_slice(ds, dst, name, first, last)
            else:
                src.copy(ds, dst, name=name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input")
    parser.add_argument("shards", type=int)
    parser.add_argument("outdir", nargs="?", default=".")
    parser.add_argument("--list", help="where to write the shard list [OUTDIR/shards.txt]")
    parser.add_argument("--files", action="store_true", help="copy each shard into its own file")
    args = parser.parse_args()
    if args.shards < 1:
        raise SystemExit("split_shards: K must be at least 1")
    os.makedirs(args.outdir, exist_ok=True)
    stem = os.path.basename(args.input)
    for ext in (".h5", ".hdf5"):
        if stem.endswith(ext):
            stem = stem[: -len(ext)]
    lines = []
    with h5py.File(args.input, "r") as src:
        n = sequence_count(src)
        if args.shards > n:
            raise SystemExit(f"split_shards: {args.shards} shards but only {n} sequences")
        for k in range(args.shards):
            first, last = k * n // args.shards, (k + 1) * n // args.shards
            if args.files:
                path = os.path.join(args.outdir, f"{stem}.shard-{k}.h5")
                write_file_shard(src, n, path, first, last)
                lines.append(os.path.abspath(path))
                print(f"split_shards: shard {k}: sequences [{first}, {last}) of {args.input} -> {path}")
            else:
                lines.append(f"{first}:{last} {os.path.abspath(args.input)}")
                print(f"split_shards: shard {k}: sequences [{first}, {last}) of {args.input}")
    list_path = args.list or os.path.join(args.outdir, "shards.txt")
    with open(list_path, "w") as out:
        out.write("".join(line + "\n" for line in lines))
    print(f"split_shards: {len(lines)} shards listed in {list_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
