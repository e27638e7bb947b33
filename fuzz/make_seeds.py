#!/usr/bin/python3
"""Seed corpora for the fuzz targets: python3 fuzz/make_seeds.py ATTNBATCH_BINARY OUT_DIR

OUT_DIR/input/: small valid and near-valid HDF5 inputs (h5py, and `attnbatch generate` at tiny
sizes); OUT_DIR/options/: argv/INI texts in fuzz_options' format (byte 0 picks the parser;
argv one word per line; a NUL byte, then the INI file). Every file is a few KB at most.
"""
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

binary, out = sys.argv[1], sys.argv[2]
inputs = os.path.join(out, "input")
options = os.path.join(out, "options")
os.makedirs(inputs, exist_ok=True)
os.makedirs(options, exist_ok=True)
rng = np.random.default_rng(1)


def h5(name, build):
    path = os.path.join(inputs, name + ".h5")
    if os.path.exists(path):
        os.remove(path)
    with h5py.File(path, "w") as f:
        build(f)


def normal(*shape, dtype="f4"):
    return rng.standard_normal(shape).astype(dtype)


def embeddings(f, shape=(2, 3, 4), dtype="f4", **kw):
    f.create_dataset("embeddings", data=normal(*shape, dtype=dtype), **kw)


def projections(f, d=4, qk=4, v=2, d_out=3):
    for name, shape in [("w_q", (d, qk)), ("w_k", (d, qk)), ("w_v", (d, v)), ("w_o", (v, d_out)),
                        ("b_q", (qk,)), ("b_k", (qk,)), ("b_v", (v,)), ("b_o", (d_out,))]:
        f.create_dataset(name, data=normal(*shape))


h5("x_f32_lengths", lambda f: (embeddings(f), f.create_dataset("lengths", data=np.array([3, 1], "i4"))))
h5("x_f64", lambda f: embeddings(f, dtype="f8"))
h5("x_chunked_gzip", lambda f: embeddings(f, chunks=(1, 3, 4), compression="gzip", shuffle=True))
h5("x_chunked_fill", lambda f: f.create_dataset("embeddings", shape=(3, 2, 4), dtype="f4", chunks=(1, 2, 4),
                                                  fillvalue=0.5))
h5("x_nan", lambda f: f.create_dataset("embeddings", data=np.array([[[1.0, np.nan]]], "f4")))
h5("x_big_f64", lambda f: f.create_dataset("embeddings", data=np.array([[[1.0, 1e300]]], "f8")))
h5("x_int", lambda f: f.create_dataset("embeddings", data=np.ones((2, 3, 4), "i4")))
h5("x_rank2", lambda f: f.create_dataset("embeddings", data=normal(3, 4)))
h5("x_lengths_too_long", lambda f: (embeddings(f), f.create_dataset("lengths", data=np.array([4, -1], "i8"))))
h5("x_lengths_float", lambda f: (embeddings(f), f.create_dataset("lengths", data=np.array([1.0, 2.0], "f4"))))
h5("x_lengths_u64", lambda f: (embeddings(f), f.create_dataset("lengths", data=np.array([2**63 + 1, 1], "u8"))))
h5("x_group", lambda f: f.create_group("embeddings"))
h5("x_softlink", lambda f: (f.create_dataset("data", data=normal(1, 2, 2)),
                           f.__setitem__("embeddings", h5py.SoftLink("/data"))))
h5("qkv_packed", lambda f: [f.create_dataset(n, data=normal(2, 3, 4)) for n in ("query", "key", "value")])
h5("qkv_split", lambda f: [f.create_dataset(n, data=normal(2, 2, 3, 2)) for n in ("query", "key", "value")])
h5("qkv_mismatch", lambda f: [f.create_dataset(n, data=normal(2, 3, 4 + (n == "key"))) for n in ("query", "key", "value")])
h5("x_weights", lambda f: (embeddings(f), projections(f)))
h5("x_weights_f64_no_o", lambda f: (embeddings(f, dtype="f8"),
                                    [f.create_dataset(n, data=normal(4, 4, dtype="f8")) for n in ("w_q", "w_k", "w_v")]))
h5("x_weights_bad_bias", lambda f: (embeddings(f), [f.create_dataset(n, data=normal(4, 4)) for n in ("w_q", "w_k", "w_v")],
                                    f.create_dataset("b_o", data=normal(3))))

with tempfile.TemporaryDirectory() as tmp:
    for name, args in [("gen_ragged", ["--num-seqs", "2", "--seq-len", "4", "--dim", "4", "--min-len", "1"]),
                       ("gen_qkv_split", ["--num-seqs", "2", "--seq-len", "3", "--qkv", "--qkv-layout", "split",
                                          "--heads", "2", "--head-dim", "2", "--dtype", "float64"]),
                       ("gen_weights", ["--num-seqs", "1", "--seq-len", "2", "--dim", "4", "--heads", "2"])]:
        target = os.path.join(inputs, name + ".h5")
        extra = ["--weights-out", os.path.join(tmp, "w.h5")] if name == "gen_weights" else []
        subprocess.run([binary, "generate", "--output", target, "--force", *args, *extra], check=True,
                       stdout=subprocess.DEVNULL)
        if extra:
            os.replace(os.path.join(tmp, "w.h5"), os.path.join(inputs, "gen_weights_file.h5"))

seeds = {
    "run_minimal": (0, ["--input", "in.h5", "--output", "out.h5"], None),
    "run_full": (0, ["--input=in.h5", "--output", "o.h5", "--heads", "8", "--causal", "--save-weights", "mean",
                     "--weights-dtype", "f16", "--weights-seqs", "2:9", "--compression", "gzip:6", "--io", "parallel",
                     "--schedule", "dynamic", "--threads", "2", "--block-q", "64", "--block-k", "32", "--kernel",
                     "reference", "--isa", "portable", "--max-memory", "1.5GiB", "--unit-sequences", "3", "--resume",
                     "--progress", "never", "--scale", "0.125", "--dry-run"], None),
    "run_config": (0, ["--output", "o.h5"], "input = in.h5\nheads = 2\n[run]\nmax-memory = 512M\n[verify]\nsamples = all\n"),
    "run_qkv": (0, ["--input", "x", "--output", "y", "--query", "q", "--key", "k", "--value", "v", "--print-config"], None),
    "bench": (1, ["--batch", "2", "--seq-len", "16", "--dim", "8", "--seed", "7", "--save-weights", "--json"], None),
    "bench_config": (1, [], "[bench]\nrepeats = 3\ncausal = true\n"),
    "generate": (2, ["--output", "d.h5", "--num-seqs", "4", "--min-len", "2", "--qkv", "--seed", "12",
                     "--slab-bytes", "4096", "--scale-values", "30"], None),
    "inspect": (3, ["data.h5", "--heads", "2", "--quick", "--json"], None),
    "inspect_dashdash": (3, ["--as", "input", "--", "-weird.h5"], None),
    "verify": (4, ["--input", "i.h5", "--output", "o.h5", "--samples", "all"], "weights = w.h5\n"),
    "weights": (5, ["--input", "i.h5", "--output", "o.h5", "--sequences", "0:4", "--heads", "0,2", "--to", "m.csv"], None),
    "bytes": (6, "1.5GiB", None),
    "bytes_plain": (6, "1000000", None),
    "isa": (7, "avx2", None),
}
for name, (selector, words, ini) in seeds.items():
    text = words if isinstance(words, str) else "\n".join(words)
    if ini is not None:
        text += "\0" + ini
    with open(os.path.join(options, name), "wb") as f:
        f.write(bytes([selector]) + text.encode())
