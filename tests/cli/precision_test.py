#!/usr/bin/python3
"""`--precision fp32|bf16` and float16/bfloat16 input data, through the binary as a user runs it.

usage: precision_test.py ATTNBATCH CASE WORKDIR        (CASE: a name from CASES, or 'list')

  bf16_run_verify   run --precision bf16, then verify (exit 0) and weights; the output records precision;
                    out against a numpy float64 reference: NMSE <= 1e-5, and max error at most
                    twice that of a plain numpy bf16 implementation (the flash-attention rule)
  matrix_unit       ATTNBATCH_NO_AMX=1 puts bf16 on AVX512-BF16; without it AMX tiles run where
                    the CPU has them; bench says why the tiles are off on a CPU that has them,
                    and nothing on one without; both paths pass verify (on a CPU without bf16
                    arithmetic: the one-line error, exit 2)
  refusals          bad --precision values and combinations: exit 2, one line naming them
  half_inputs       float16 and bfloat16 data (bfloat16: a 2-byte HDF5 float with 8 exponent
                    bits) give the bits of a float32 file holding the same values
  avx512_rows       ATTNBATCH_AVX512_ROWS=8 and =12 (the AVX-512 fp32 kernel's register-tile
                    rows) give the same output, lse and maps, bit for bit, with a causal mask,
                    ragged lengths and L a multiple of neither; any other value: exit 2, one line;
                    bench reports the rows (12 on Intel cores by default, 8 on others)
"""
import json
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, failures, fresh_directory, skip  # noqa: E402

BIN = sys.argv[1] if len(sys.argv) > 1 else "attnbatch"
BF16_MISSING = "this CPU has neither AMX-BF16 nor AVX512-BF16"


def attnbatch(*args, env=None, expect=0):
    environment = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    environment.update(env or {})
    result = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300, env=environment)
    if expect is not None:
        check(result.returncode == expect, "%s: exit %d, expected %d\n%s%s" % (
            " ".join(args), result.returncode, expect, result.stdout, result.stderr))
    return result


def bf16_available():
    probe = attnbatch("bench", "--precision", "bf16", "--batch", "1", "--heads", "1", "--seq-len", "16", "--dim", "16",
                      "--repeats", "1", "--json", expect=None)
    if probe.returncode == 0:
        return True
    check(probe.returncode == 2 and BF16_MISSING in probe.stderr and len(probe.stderr.strip().splitlines()) == 1,
          "bench --precision bf16 on a CPU without bf16: exit %d, %r" % (probe.returncode, probe.stderr))
    return False


def round_bf16(x):
    """float32 -> nearest bfloat16 (ties to even), as float32."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def attention(q, k, v, length, causal, bf16):
    """One head in float64, or as a plain bf16 implementation (operands and P rounded)."""
    L, dv = q.shape[0], v.shape[1]
    out = np.zeros((L, dv))
    if bf16:
        q, k, v = (round_bf16(t).astype(np.float64) for t in (q, k, v))
    for i in range(length):
        keys = min(length, i + 1) if causal else length
        s = q[i] @ k[:keys].T / np.sqrt(q.shape[1])
        e = np.exp(s - s.max())
        p = e / e.sum()
        if bf16:
            p = round_bf16(p).astype(np.float64)
        out[i] = p @ v[:keys]
    return out


def make_input(path, n=6, length=96, d=64, seed=5):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, length, d)).astype(np.float32)
    lengths = np.array([length, 0, 1, 50, length, 77][:n], np.int32)
    with h5py.File(path, "w") as f:
        f["embeddings"] = x
        f["lengths"] = lengths
    return x, lengths


def bf16_run_verify(work):
    inp, out, out32 = (os.path.join(work, name) for name in ("in.h5", "bf16.h5", "fp32.h5"))
    x, lengths = make_input(inp)
    if not bf16_available():
        attnbatch("run", "--input", inp, "--output", out, "--precision", "bf16", expect=2)
        skip("this CPU has neither AMX-BF16 nor AVX512-BF16: only the refusal of --precision bf16 was checked")
    heads, causal = 2, True
    attnbatch("run", "--input", inp, "--output", out, "--heads", str(heads), "--causal", "--precision", "bf16")
    attnbatch("run", "--input", inp, "--output", out32, "--heads", str(heads), "--causal")
    verified = attnbatch("verify", "--input", inp, "--output", out, "--samples", "all")
    check("computed in bf16" in verified.stdout and "plain bf16" in verified.stdout, verified.stdout)
    # `weights` recomputes maps from /lse with the run's bf16 rounding of Q and K: they match the
    # stored ones up to the odd bf16 rounding flip of a projection recomputed in double.
    maps = os.path.join(work, "maps.h5")
    attnbatch("weights", "--input", inp, "--output", out, "--sequences", "0:6", "--to", maps)
    with h5py.File(maps, "r") as m, h5py.File(out, "r") as f:
        recomputed, stored = m["attention"][...], f["attention"][...]
        check(np.abs(recomputed - stored).max() < 1e-3, "weights of a bf16 run: %.3g off the stored maps" % np.abs(recomputed - stored).max())
    with h5py.File(out, "r") as f, h5py.File(out32, "r") as g:
        check(f.attrs["precision"] == "bf16", "precision attribute %r" % f.attrs["precision"])
        check(g.attrs["precision"] == "fp32", "fp32 run's precision attribute %r" % g.attrs["precision"])
        got = f["output"][...].astype(np.float64)
        check(not np.array_equal(got, g["output"][...]), "bf16 output equals the fp32 output: nothing was rounded")
    err = err_plain = 0.0
    sq_err = sq_ref = 0.0
    d_head = x.shape[2] // heads
    for n in range(x.shape[0]):
        for h in range(heads):
            cols = slice(h * d_head, (h + 1) * d_head)
            t = x[n][:, cols]
            ref = attention(t.astype(np.float64), t.astype(np.float64), t.astype(np.float64), lengths[n], causal, False)
            plain = attention(t, t, t, lengths[n], causal, True)
            mine = got[n][:, cols]
            err = max(err, np.abs(mine - ref).max())
            err_plain = max(err_plain, np.abs(plain - ref).max())
            sq_err += ((mine - ref) ** 2).sum()
            sq_ref += (ref ** 2).sum()
    nmse = sq_err / sq_ref
    print("bf16: max error %.3g (plain bf16 %.3g), NMSE %.3g" % (err, err_plain, nmse))
    check(nmse <= 1e-5, "NMSE %.3g > 1e-5" % nmse)
    check(err <= 2 * err_plain, "max error %.3g > twice the plain bf16 implementation's %.3g" % (err, err_plain))


def cpu_has_amx():
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    return "amx_tile" in flags and "amx_bf16" in flags


def matrix_unit(work):
    inp = os.path.join(work, "in.h5")
    make_input(inp, n=4, length=64, d=32)
    if not bf16_available():
        skip("this CPU has neither AMX-BF16 nor AVX512-BF16")
    bench = ["bench", "--precision", "bf16", "--batch", "2", "--heads", "2", "--seq-len", "64", "--dim", "32",
             "--repeats", "1", "--json"]
    off = json.loads(attnbatch(*bench, env={"ATTNBATCH_NO_AMX": "1"}).stdout)
    check(off["matrix_unit"] == "avx512-bf16" and off["precision"] == "bf16", "ATTNBATCH_NO_AMX=1: %r" % off)
    default = json.loads(attnbatch(*bench).stdout)
    expected = "amx-bf16" if cpu_has_amx() else "avx512-bf16"
    # A kernel too old for arch_prctl(ARCH_REQ_XCOMP_PERM) keeps AMX CPUs on AVX512-BF16 too.
    check(default["matrix_unit"] in (expected, "avx512-bf16"), "without ATTNBATCH_NO_AMX: %r, CPU AMX: %s" % (
        default["matrix_unit"], cpu_has_amx()))
    zero = json.loads(attnbatch(*bench, env={"ATTNBATCH_NO_AMX": "0"}).stdout)
    check(zero["matrix_unit"] == default["matrix_unit"], "ATTNBATCH_NO_AMX=0 must not disable AMX")
    # Why the tiles are off, where the CPU has them; nothing to say where it has none.
    if cpu_has_amx():
        check("ATTNBATCH_NO_AMX" in off["amx_tiles_off"], "ATTNBATCH_NO_AMX=1 on an AMX CPU: %r" % off["amx_tiles_off"])
        check((default["amx_tiles_off"] == "") == (default["matrix_unit"] == "amx-bf16"),
              "tiles %s, reason %r" % (default["matrix_unit"], default["amx_tiles_off"]))
    else:
        check(off["amx_tiles_off"] == "" and default["amx_tiles_off"] == "",
              "no AMX on this CPU, yet a reason: %r, %r" % (off["amx_tiles_off"], default["amx_tiles_off"]))
    text = attnbatch(*bench[:-1], env={"ATTNBATCH_NO_AMX": "1"}).stdout
    check(("(AMX tiles off: ATTNBATCH_NO_AMX is set)" in text) == cpu_has_amx(),
          "bench's header: %r" % text.splitlines()[0])
    outputs = {}
    for label, env in (("default", {}), ("no_amx", {"ATTNBATCH_NO_AMX": "1"})):
        out = os.path.join(work, label + ".h5")
        attnbatch("run", "--input", inp, "--output", out, "--heads", "2", "--precision", "bf16", env=env)
        attnbatch("verify", "--input", inp, "--output", out, "--samples", "all")
        with h5py.File(out, "r") as f:
            outputs[label] = f["output"][...]
    if default["matrix_unit"] == "avx512-bf16":
        check(np.array_equal(outputs["default"], outputs["no_amx"]), "the same path gave different bits")


def refusals(work):
    inp = os.path.join(work, "in.h5")
    make_input(inp, n=2, length=16, d=8)
    out = os.path.join(work, "out.h5")

    def refused(args, fragments):
        result = attnbatch(*args, expect=2)
        lines = result.stderr.strip().splitlines()
        check(len(lines) == 1, "%s: expected one line, got %r" % (" ".join(args), result.stderr))
        for fragment in fragments:
            check(fragment in result.stderr, "%s: %r missing from %r" % (" ".join(args), fragment, result.stderr))
        check(not os.path.exists(out) and not os.path.exists(out + ".partial"), "an output was left")

    run = ["run", "--input", inp, "--output", out]
    refused(run + ["--precision", "fp16"], ["--precision", "'fp16'", "fp32|bf16"])
    refused(["bench", "--precision", "BF16"], ["--precision", "fp32|bf16"])
    if bf16_available():
        refused(run + ["--precision", "bf16", "--isa", "avx512"], ["--isa avx512", "computes in fp32", "bf16"])
        refused(run + ["--precision", "bf16", "--kernel", "reference"], ["--precision bf16", "reference", "fp64"])
        refused(run + ["--isa", "avx512_bf16"], ["--isa avx512_bf16", "computes in bf16, not fp32"])
    else:
        refused(run + ["--precision", "bf16"], [BF16_MISSING])


def write_bf16(f, name, values):
    """bfloat16 in HDF5: binary32's sign and exponent with a 7-bit mantissa, 2 bytes."""
    layout = h5py.h5t.IEEE_F32LE.copy()
    layout.set_fields(15, 7, 8, 0, 7)
    layout.set_size(2)
    layout.set_ebias(127)
    bits = (round_bf16(values).view(np.uint32) >> 16).astype(np.uint16)
    dataset = h5py.h5d.create(f.id, name.encode(), layout, h5py.h5s.create_simple(values.shape))
    dataset.write(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=layout)


def half_inputs(work):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((5, 40, 16)).astype(np.float32)
    lengths = np.array([40, 3, 0, 17, 40], np.int32)
    files = {}
    for name, narrow, wide in (("f16", None, x.astype(np.float16).astype(np.float32)), ("bf16", None, round_bf16(x))):
        half = os.path.join(work, name + ".h5")
        full = os.path.join(work, name + "_as_f32.h5")
        with h5py.File(half, "w") as f:
            if name == "f16":
                f["query"] = x.astype(np.float16)
                f["key"] = x[:, ::-1].astype(np.float16)
                f["value"] = x.astype(np.float16)
            else:
                write_bf16(f, "query", x)
                write_bf16(f, "key", np.ascontiguousarray(x[:, ::-1]))
                write_bf16(f, "value", x)
            f["lengths"] = lengths
        with h5py.File(full, "w") as f:
            f["query"] = wide
            f["key"] = np.ascontiguousarray(wide[:, ::-1])
            f["value"] = wide
            f["lengths"] = lengths
        files[name] = (half, full)
    for name, (half, full) in files.items():
        shown = attnbatch("inspect", half)
        check(("float16" if name == "f16" else "bfloat16") in shown.stdout, shown.stdout)
        outs = []
        for path in (half, full):
            out = path.replace(".h5", "_out.h5")
            attnbatch("run", "--input", path, "--query", "/query", "--key", "/key", "--value", "/value",
                      "--heads", "2", "--causal", "--output", out)
            with h5py.File(out, "r") as f:
                outs.append({k: f[k][...] for k in ("output", "lse", "attention")})
        for k in ("output", "lse", "attention"):
            check(outs[0][k].tobytes() == outs[1][k].tobytes(), "%s: /%s differs from the float32 file's" % (name, k))
        attnbatch("verify", "--input", half, "--output", half.replace(".h5", "_out.h5"), "--samples", "all")


def avx512_rows(work):
    inp = os.path.join(work, "in.h5")
    make_input(inp, n=6, length=101, d=64)
    out = os.path.join(work, "refused.h5")
    refused = attnbatch("run", "--input", inp, "--output", out, env={"ATTNBATCH_AVX512_ROWS": "16"}, expect=2)
    lines = refused.stderr.strip().splitlines()
    check(len(lines) == 1 and "ATTNBATCH_AVX512_ROWS=16" in refused.stderr and "expected 8 or 12" in refused.stderr,
          "ATTNBATCH_AVX512_ROWS=16: %r" % refused.stderr)
    check(not os.path.exists(out) and not os.path.exists(out + ".partial"), "the refused run left an output")
    bench = ("bench", "--isa", "avx512", "--batch", "1", "--heads", "1", "--seq-len", "16", "--dim", "16", "--repeats", "1",
             "--json")
    probe = attnbatch(*bench, expect=None)
    if probe.returncode != 0:
        skip("this CPU has no AVX-512: only the refusal of a bad ATTNBATCH_AVX512_ROWS was checked")
    vendor_intel = "GenuineIntel" in open("/proc/cpuinfo").read()
    check(json.loads(probe.stdout).get("row_block") == (12 if vendor_intel else 8),
          "bench's row_block without the variable: %r (Intel CPU: %s)" % (probe.stdout, vendor_intel))
    for rows in (8, 12):
        told = json.loads(attnbatch(*bench, env={"ATTNBATCH_AVX512_ROWS": str(rows)}).stdout).get("row_block")
        check(told == rows, "bench with ATTNBATCH_AVX512_ROWS=%d reports row_block %r" % (rows, told))
    results = {}
    for rows in ("8", "12"):
        path = os.path.join(work, "rows%s.h5" % rows)
        attnbatch("run", "--input", inp, "--output", path, "--isa", "avx512", "--causal", "--heads", "2",
                  "--save-weights", "all", "--threads", "2", env={"ATTNBATCH_AVX512_ROWS": rows})
        with h5py.File(path, "r") as f:
            results[rows] = {name: f[name][()] for name in ("output", "lse", "attention")}
    for name in ("output", "lse", "attention"):
        eight, twelve = results["8"][name], results["12"][name]
        check(eight.shape == twelve.shape and eight.tobytes() == twelve.tobytes(),
              "/%s differs between 8- and 12-row tiles" % name)
    check(np.isfinite(results["8"]["output"]).all(), "/output holds non-finite values")


CASES = {"bf16_run_verify": bf16_run_verify, "matrix_unit": matrix_unit, "refusals": refusals,
         "half_inputs": half_inputs, "avx512_rows": avx512_rows}


def main():
    if len(sys.argv) == 3 and sys.argv[2] == "list":
        print("\n".join(CASES))
        return 0
    if len(sys.argv) != 4 or sys.argv[2] not in CASES:
        print(__doc__)
        return 2
    work = sys.argv[3]
    fresh_directory(work)
    CASES[sys.argv[2]](work)
    print("%s: %d failure(s)" % (sys.argv[2], len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
