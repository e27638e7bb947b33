#!/usr/bin/python3
"""End-to-end: input written by h5py -> attnbatch run -> attnbatch verify, and the output
read back by h5py and compared with a numpy float64 reference of this script's own.

    pipeline_e2e_test.py ATTNBATCH_BINARY CASE WORKDIR     (CASE: a name from CASES, or 'list')

Each case builds its input here (so lengths 0 and 1 and every layout are exact), runs the
binary, and checks exit codes, schema, masking and numbers.
"""
import os
import subprocess
import sys

import h5py
import numpy as np

BIN = sys.argv[1] if len(sys.argv) > 1 else "attnbatch"


def attention64(q, k, v, length, causal, scale):
    """One head: q (L, dk), k (L, dk), v (L, dv), float64; rows >= length zero, lse -inf."""
    L = q.shape[0]
    out = np.zeros((L, v.shape[1]))
    lse = np.full(L, -np.inf)
    w = np.zeros((L, L))
    for i in range(min(length, L)):
        keys = min(length, i + 1) if causal else length
        s = (q[i] @ k[:keys].T) * scale
        m = s.max()
        e = np.exp(s - m)
        out[i] = e @ v[:keys] / e.sum()
        lse[i] = m + np.log(e.sum())
        w[i, :keys] = e / e.sum()
    return out, lse, w


def run(*args, expect=0):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)
    if p.returncode != expect:
        raise AssertionError(f"{' '.join(args)}: exit {p.returncode}, expected {expect}\n{p.stdout}\n{p.stderr}")
    return p


def check_output(path, X, lengths, heads, causal, save, dtype, wseqs=None, proj=None, qkv=None):
    """X: (N, L, d) embeddings, or qkv=(q, k, v) as (N, H, L, d) float64."""
    with h5py.File(path, "r") as f:
        assert f.attrs["complete"] == 1, "complete attribute"
        out, lse, lens = f["output"][...], f["lse"][...], f["lengths"][...]
        att = f["attention"] if "attention" in f else None
        assert lens.dtype == np.int32 and list(lens) == list(lengths), "lengths"
        assert out.dtype == np.float32 and lse.dtype == np.float32
        N = len(lengths)
        first, last = wseqs if wseqs else (0, N)
        if save == "none":
            assert att is None, "no /attention without weights"
        else:
            assert att.dtype == (np.float16 if dtype == "f16" else np.float32), att.dtype
            assert att.shape[0] == last - first and att.shape[1] == (1 if save == "mean" else heads), att.shape
            if wseqs:
                assert att.attrs["first_sequence"] == first
        for n in range(N):
            if qkv is not None:
                q, k, v = (t[n] for t in qkv)
            else:
                x = X[n].astype(np.float64)
                if proj:
                    q, k, v = (x @ proj[w] + proj.get("b" + w[1:], 0) for w in ("w_q", "w_k", "w_v"))
                else:
                    q = k = v = x
                L = x.shape[0]
                q, k, v = (t.reshape(L, heads, -1).transpose(1, 0, 2) for t in (q, k, v))
            dk = q.shape[2]
            scale = 1 / np.sqrt(dk)
            heads_out, mean_w = [], 0
            for h in range(heads):
                o, l, w = attention64(q[h], k[h], v[h], lengths[n], causal, scale)
                heads_out.append(o)
                np.testing.assert_allclose(lse[n, h][np.isfinite(l)], l[np.isfinite(l)], rtol=2e-5, atol=2e-5)
                assert np.all(np.isneginf(lse[n, h][~np.isfinite(l)])), "lse -inf on masked rows"
                if att is not None and first <= n < last and save == "all":
                    got = att[n - first, h].astype(np.float64)
                    np.testing.assert_allclose(got, w, atol=1e-3 if dtype == "f16" else 1e-5)
                mean_w = mean_w + w / heads
            if att is not None and first <= n < last and save == "mean":
                np.testing.assert_allclose(att[n - first, 0].astype(np.float64), mean_w, atol=1e-3 if dtype == "f16" else 1e-5)
            ref = np.concatenate(heads_out, axis=1)
            if proj and "w_o" in proj:
                ref = ref @ proj["w_o"] + proj.get("b_o", 0)
                ref[lengths[n]:] = 0
            scale_ref = max(np.abs(ref).max(), 1e-30)
            np.testing.assert_allclose(out[n], ref, atol=2e-4 * scale_ref, rtol=0)
            assert np.all(out[n, lengths[n]:] == 0), "rows past the length are zero"


def embeddings_case(work, N=6, L=40, d=16, heads=2, causal=False, save="all", dtype="f32", extra=(),
                    fdtype="f4", wseqs=None, proj=False, w_o=False, bias=False, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, L, d)).astype(fdtype)
    lengths = np.array([L, 0, 1, L // 2, L - 1, 3][:N] + [L] * max(0, N - 6), np.int32)
    inp, out = os.path.join(work, "in.h5"), os.path.join(work, "out.h5")
    with h5py.File(inp, "w") as f:
        f["embeddings"] = X
        f["lengths"] = lengths
    args = ["--input", inp, "--output", out, "--heads", str(heads), "--save-weights", save, "--weights-dtype", dtype, *extra]
    P = None
    if proj:
        P = {w: (rng.standard_normal((d, d)) / np.sqrt(d)) for w in ("w_q", "w_k", "w_v")}
        if w_o:
            P["w_o"] = rng.standard_normal((d, 24)) / np.sqrt(d)
        if bias:
            for b, width in (("b_q", d), ("b_k", d), ("b_v", d), ("b_o", 24 if w_o else None)):
                if width:
                    P[b] = rng.standard_normal(width) * 0.1
        P = {k: v.astype(np.float32).astype(np.float64) for k, v in P.items()}
        wfile = os.path.join(work, "proj.h5")
        with h5py.File(wfile, "w") as f:
            for k, v in P.items():
                f[k] = v.astype(np.float32)
        args += ["--weights", wfile]
    if causal:
        args.append("--causal")
    if wseqs:
        args += ["--weights-seqs", f"{wseqs[0]}:{wseqs[1]}"]
    run("run", *args)
    assert not os.path.exists(out + ".partial"), ".partial renamed"
    verify = ["verify", "--input", inp, "--output", out, "--samples", "all"] + (["--weights", wfile] if proj else [])
    run(*verify)
    check_output(out, X.astype(np.float32).astype(np.float64), list(lengths), heads, causal, save, dtype, wseqs, P)


def qkv_case(work, layout, N=5, L=33, heads=4, dk=8, dv=6, causal=False, seed=1):
    rng = np.random.default_rng(seed)
    q, k = (rng.standard_normal((N, heads, L, dk)).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((N, heads, L, dv)).astype(np.float32)
    lengths = np.array([L, 1, 0, 17, 32][:N], np.int32)
    inp, out = os.path.join(work, "qkv.h5"), os.path.join(work, "out.h5")
    with h5py.File(inp, "w") as f:
        for name, t in (("query", q), ("key", k), ("value", v)):
            f[name] = t if layout == "split" else t.transpose(0, 2, 1, 3).reshape(N, L, -1)
        f["lengths"] = lengths
    args = ["run", "--input", inp, "--output", out, "--query", "/query", "--key", "/key", "--value", "/value",
            "--heads", str(heads), "--save-weights", "all"] + (["--causal"] if causal else [])
    run(*args)
    run("verify", "--input", inp, "--output", out, "--samples", "all")
    check_output(out, None, list(lengths), heads, causal, "all", "f32",
                 qkv=tuple(t.astype(np.float64) for t in (q, k, v)))


def weights_subcommand_case(work, causal):
    """A run without stored weights, then `weights` recomputes maps from /lse: compared with
    numpy float64 maps, as HDF5 and as CSV."""
    rng = np.random.default_rng(5)
    N, L, d, heads = 4, 24, 12, 3
    X = rng.standard_normal((N, L, d)).astype(np.float32)
    lengths = np.array([L, 1, 0, 13], np.int32)
    inp, out = os.path.join(work, "in.h5"), os.path.join(work, "out.h5")
    maps, table = os.path.join(work, "maps.h5"), os.path.join(work, "maps.csv")
    for path in (maps, table):
        if os.path.exists(path):
            os.remove(path)
    with h5py.File(inp, "w") as f:
        f["embeddings"] = X
        f["lengths"] = lengths
    run("run", "--input", inp, "--output", out, "--heads", str(heads), "--save-weights", "none",
        *(["--causal"] if causal else []))
    run("weights", "--input", inp, "--output", out, "--sequences", "0,3,1", "--heads", "2,0", "--to", maps)
    run("weights", "--input", inp, "--output", out, "--sequences", "3", "--heads", "1", "--to", table)
    run("weights", "--input", inp, "--output", out, "--sequences", "9", "--to", maps, expect=2)
    x = X.astype(np.float64)
    with h5py.File(maps, "r") as f:
        got = f["attention"][...]
        assert got.shape == (3, 2, L, L) and list(f["attention"].attrs["sequences"]) == [0, 3, 1]
    for si, n in enumerate((0, 3, 1)):
        q = x[n].reshape(L, heads, -1).transpose(1, 0, 2)
        for hi, h in enumerate((2, 0)):
            _, _, w = attention64(q[h], q[h], q[h], lengths[n], causal, 1 / np.sqrt(d // heads))
            np.testing.assert_allclose(got[si, hi], w, atol=1e-5)
    rows = np.genfromtxt(table, delimiter=",", names=True)
    q = x[3].reshape(L, heads, -1).transpose(1, 0, 2)
    _, _, w = attention64(q[1], q[1], q[1], lengths[3], causal, 1 / np.sqrt(d // heads))
    assert len(rows) == np.count_nonzero(w), "one CSV row per visible pair"
    np.testing.assert_allclose(rows["weight"], w[rows["query"].astype(int), rows["key"].astype(int)], atol=1e-5)


def packed_case(work, qkv=False, proj=False, causal=False, save="all", dtype="f32", wseqs=None, heads=2, seed=7):
    """The packed layout: tokens [T, d] (or Q/K/V [T, H*d]) with /offsets, lengths 0 and 1
    included; the packed output checked against numpy per sequence, and byte for byte against
    the same tokens run padded."""
    rng = np.random.default_rng(seed)
    lengths = np.array([37, 0, 1, 12, 36, 5, 23], np.int32)
    N, L, d = len(lengths), int(lengths.max()), 16
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    T = int(offsets[-1])
    inp, out = os.path.join(work, "in.h5"), os.path.join(work, "out.h5")
    padded_in, padded_out = os.path.join(work, "padded.h5"), os.path.join(work, "padded-out.h5")
    for path in (padded_in, padded_out):
        if os.path.exists(path):
            os.remove(path)
    names = ("query", "key", "value") if qkv else ("tokens",)
    rows = {name: rng.standard_normal((T, d)).astype(np.float32) for name in names}
    with h5py.File(inp, "w") as f, h5py.File(padded_in, "w") as g:
        f["offsets"] = offsets
        g["lengths"] = lengths
        for name, r in rows.items():
            f[name] = r
            padded = np.zeros((N, L, d), np.float32)
            for n in range(N):
                padded[n, :lengths[n]] = r[offsets[n]:offsets[n + 1]]
            g["embeddings" if name == "tokens" else name] = padded
    args = ["--heads", str(heads), "--save-weights", save, "--weights-dtype", dtype]
    if qkv:
        args += ["--query", "/query", "--key", "/key", "--value", "/value"]
    P = None
    if proj:
        P = {w: rng.standard_normal((d, d)) / np.sqrt(d) for w in ("w_q", "w_k", "w_v")}
        P["w_o"] = rng.standard_normal((d, 24)) / np.sqrt(d)
        P["b_q"], P["b_o"] = rng.standard_normal(d) * 0.1, rng.standard_normal(24) * 0.1
        P = {k: v.astype(np.float32).astype(np.float64) for k, v in P.items()}
        wfile = os.path.join(work, "proj.h5")
        with h5py.File(wfile, "w") as f:
            for k, v in P.items():
                f[k] = v.astype(np.float32)
        args += ["--weights", wfile]
    if causal:
        args.append("--causal")
    if wseqs:
        args += ["--weights-seqs", f"{wseqs[0]}:{wseqs[1]}"]
    run("run", "--input", inp, "--output", out, *args)
    run("run", "--input", padded_in, "--output", padded_out, *args)
    run("verify", "--input", inp, "--output", out, "--samples", "all")
    inspected = run("inspect", out)
    assert "packed layout" in inspected.stdout, inspected.stdout
    first, last = wseqs if wseqs else (0, N)
    with h5py.File(out, "r") as f, h5py.File(padded_out, "r") as g:
        assert f.attrs["sequence_layout"] == "packed" and f.attrs["complete"] == 1
        assert f["output"].shape[0] == T and f["lse"].shape == (heads, T), (f["output"].shape, f["lse"].shape)
        assert list(f["offsets"][...]) == list(offsets) and list(f["lengths"][...]) == list(lengths)
        for n in range(N):
            a, b = offsets[n], offsets[n + 1]
            assert f["output"][a:b].tobytes() == g["output"][n, :lengths[n]].tobytes(), "output of %d: packed != padded" % n
            assert f["lse"][:, a:b].tobytes() == g["lse"][n, :, :lengths[n]].tobytes(), "lse of %d: packed != padded" % n
        if save != "none":
            assert f["attention"][...].tobytes() == g["attention"][...].tobytes(), "attention: packed != padded"
        # Against numpy, per sequence (an empty one has no rows at all).
        for n in range(N):
            a, b, length = offsets[n], offsets[n + 1], int(lengths[n])
            if length == 0:
                if save != "none" and first <= n < last:
                    assert not np.any(f["attention"][n - first]), "the map of an empty sequence is zero"
                continue
            if qkv:
                q, k, v = (rows[name][a:b].astype(np.float64).reshape(length, heads, -1).transpose(1, 0, 2)
                           for name in names)
            else:
                x = rows["tokens"][a:b].astype(np.float64)
                if proj:
                    q, k, v = (x @ P[w] + P.get("b" + w[1:], 0) for w in ("w_q", "w_k", "w_v"))
                else:
                    q = k = v = x
                q, k, v = (t.reshape(length, heads, -1).transpose(1, 0, 2) for t in (q, k, v))
            scale = 1 / np.sqrt(q.shape[2])
            outs, mean_w = [], 0
            for h in range(heads):
                o, l, w = attention64(q[h], k[h], v[h], length, causal, scale)
                outs.append(o)
                np.testing.assert_allclose(f["lse"][h, a:b], l, rtol=2e-5, atol=2e-5)
                if save == "all" and first <= n < last:
                    got = f["attention"][n - first, h, :length, :length].astype(np.float64)
                    np.testing.assert_allclose(got, w, atol=1e-3 if dtype == "f16" else 1e-5)
                    assert not np.any(f["attention"][n - first, h, length:, :]), "map rows past the length are zero"
                mean_w = mean_w + w / heads
            if save == "mean" and first <= n < last:
                got = f["attention"][n - first, 0, :length, :length].astype(np.float64)
                np.testing.assert_allclose(got, mean_w, atol=1e-3 if dtype == "f16" else 1e-5)
            ref = np.concatenate(outs, axis=1)
            if proj:
                ref = ref @ P["w_o"] + P["b_o"]
            np.testing.assert_allclose(f["output"][a:b], ref, atol=2e-4 * max(np.abs(ref).max(), 1e-30), rtol=0)


def generate_packed_case(work):
    """generate --layout packed -> run -> verify -> inspect: the round trip, and the same
    numbers as generate's padded layout."""
    packed, padded = os.path.join(work, "in.h5"), os.path.join(work, "padded.h5")
    out, padded_out = os.path.join(work, "out.h5"), os.path.join(work, "padded-out.h5")
    for path in (padded, padded_out):
        if os.path.exists(path):
            os.remove(path)
    common = ["--num-seqs", "30", "--seq-len", "70", "--dim", "16", "--heads", "2", "--min-len", "0", "--seed", "4"]
    run("generate", "--output", packed, "--layout", "packed", *common)
    run("generate", "--output", padded, *common)
    run("inspect", packed)
    for path, result in ((packed, out), (padded, padded_out)):
        run("run", "--input", path, "--output", result, "--heads", "2", "--causal", "--save-weights", "mean")
    run("verify", "--input", packed, "--output", out, "--samples", "all")
    run("inspect", out)
    with h5py.File(out, "r") as f, h5py.File(padded_out, "r") as g, h5py.File(packed, "r") as i:
        offsets, lengths = f["offsets"][...], g["lengths"][...]
        assert list(np.diff(offsets)) == list(lengths), "the same lengths in both layouts"
        assert "tokens" in i and i.attrs["sequence_layout"] == "packed" and "lengths" not in i
        for n in range(len(lengths)):
            a, b = offsets[n], offsets[n + 1]
            assert f["output"][a:b].tobytes() == g["output"][n, :lengths[n]].tobytes(), "output of %d" % n
        assert f["attention"][...].tobytes() == g["attention"][...].tobytes()


CASES = {
    "packed_x_causal_mean_f16": lambda w: packed_case(w, causal=True, save="mean", dtype="f16"),
    "packed_proj_w_o_weights_seqs": lambda w: packed_case(w, proj=True, wseqs=(2, 6)),
    "packed_qkv": lambda w: packed_case(w, qkv=True, causal=True, heads=4),
    "packed_generate_round_trip": generate_packed_case,
    "weights_subcommand": lambda w: weights_subcommand_case(w, causal=False),
    "weights_subcommand_causal": lambda w: weights_subcommand_case(w, causal=True),
    "x_ragged_all_f32": lambda w: embeddings_case(w),
    "x_causal_mean_f16": lambda w: embeddings_case(w, causal=True, save="mean", dtype="f16", heads=4),
    "x_all_f16": lambda w: embeddings_case(w, save="all", dtype="f16"),
    "x_no_weights": lambda w: embeddings_case(w, save="none"),
    "x_float64_input": lambda w: embeddings_case(w, fdtype="f8"),
    "x_weights_seqs": lambda w: embeddings_case(w, N=8, wseqs=(2, 5)),
    "x_gzip": lambda w: embeddings_case(w, extra=("--compression", "gzip:6")),
    "x_reference_kernel": lambda w: embeddings_case(w, extra=("--kernel", "reference")),
    "x_units_of_two": lambda w: embeddings_case(w, N=9, L=64, extra=("--unit-sequences", "2")),
    "proj_qkv": lambda w: embeddings_case(w, proj=True, heads=2),
    "proj_w_o_bias_causal": lambda w: embeddings_case(w, proj=True, w_o=True, bias=True, causal=True, heads=4),
    "qkv_packed_3d": lambda w: qkv_case(w, "packed"),
    "qkv_split_4d_causal": lambda w: qkv_case(w, "split", causal=True),
}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[2] == "list":
        print("\n".join(CASES))
        sys.exit(0)
    case, work = sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    for name in ("in.h5", "qkv.h5", "out.h5", "out.h5.partial", "proj.h5"):
        if os.path.exists(os.path.join(work, name)):
            os.remove(os.path.join(work, name))
    CASES[case](work)
    print(f"{case}: ok")
