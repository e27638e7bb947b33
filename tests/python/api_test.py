#!/usr/bin/python3
"""The Python module's face: its type hints match the functions, help() says what they do,
open() reads an output back (padded and packed, split per sequence, as xarray), and the
results of attention() are the engine's buffers, not copies.

usage: api_test.py WORKDIR
"""
import ast
import inspect
import os
import pydoc
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, exit_status, fresh_directory  # noqa: E402

import attnbatch  # noqa: E402


def stub_signatures():
    """name -> [(parameter, kind, default source)] from the package's __init__.pyi."""
    path = os.path.join(os.path.dirname(attnbatch.__file__), "__init__.pyi")
    tree = ast.parse(open(path).read())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            a = node.args
            params = [(p.arg, "positional") for p in a.args] + [(p.arg, "keyword") for p in a.kwonlyargs]
            if a.kwarg:
                params.append((a.kwarg.arg, "var_keyword"))
            defaults = [None] * (len(a.args) - len(a.defaults)) + [ast.unparse(d) for d in a.defaults]
            defaults += [None if d is None else ast.unparse(d) for d in a.kw_defaults]
            found[node.name] = [(name, kind, default) for (name, kind), default in
                                zip(params, defaults + [None] * (len(params) - len(defaults)))]
    return found


def runtime_signature(function):
    kinds = {inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional", inspect.Parameter.KEYWORD_ONLY: "keyword",
             inspect.Parameter.VAR_KEYWORD: "var_keyword"}
    result = []
    for p in inspect.signature(function).parameters.values():
        default = None if p.default is inspect.Parameter.empty else repr(p.default)
        result.append((p.name, kinds[p.kind], default))
    return result


def main():
    work = sys.argv[1]
    fresh_directory(work)
    stubs = stub_signatures()
    for name in ("attention", "run", "open"):
        stub = [(p, k, None if d is None else repr(ast.literal_eval(d)) if d != "..." else None) for p, k, d in stubs.get(name, [])]
        check(stub == runtime_signature(getattr(attnbatch, name)),
              f"__init__.pyi's {name} {stub} differs from the function's {runtime_signature(getattr(attnbatch, name))}")
    text = pydoc.render_doc(attnbatch.attention, renderer=pydoc.plaintext)
    for word in ("x_or_q", "heads", "kv_heads", "causal", "lengths", "projections", "return_maps", "GIL", "float32",
                 "Returns", "Example"):
        check(word in text, f"help(attnbatch.attention) does not mention {word}")
    check("comm" in pydoc.render_doc(attnbatch.run, renderer=pydoc.plaintext), "help(attnbatch.run) does not explain comm")

    # The results are views of the engine's buffers (no copy on the way out).
    x = np.random.default_rng(5).standard_normal((3, 32, 64), dtype=np.float32)
    y, lse = attnbatch.attention(x, heads=2, return_lse=True)
    check(y.base is not None and not y.flags.owndata and y.flags.c_contiguous, "the output was copied")
    check(y.dtype == np.float32 and lse.dtype == np.float32, "results are not float32")
    # ... nor on the way in: a float32 C-contiguous array reaches the core as itself (its data
    # pointer is what the kernels read); float16 is converted once.
    check(attnbatch._operand(x, "x") is x, "a float32 C-contiguous input was copied")
    check(attnbatch._operand(x[0], "x").base is x, "a [L, d] input was copied (expected a view)")
    check(attnbatch._operand(x.astype(np.float16), "x").dtype == np.float32, "float16 input is not converted")

    # open(): a padded output and a packed one.
    padded_in, packed_in = os.path.join(work, "padded.h5"), os.path.join(work, "packed.h5")
    lengths = np.array([32, 5, 17], dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    with h5py.File(padded_in, "w") as f:
        f["embeddings"], f["lengths"] = x, lengths
    with h5py.File(packed_in, "w") as f:
        f["tokens"] = np.concatenate([x[s, :n] for s, n in enumerate(lengths)])
        f["offsets"] = offsets
    padded_out, packed_out = os.path.join(work, "padded_out.h5"), os.path.join(work, "packed_out.h5")
    attnbatch.run(padded_in, padded_out, heads=2, progress="never")
    attnbatch.run(packed_in, packed_out, heads=2, progress="never")
    out = attnbatch.open(padded_out)
    check(np.array_equal(out.output, attnbatch.attention(x, heads=2, lengths=lengths)), "open(): /output of the padded run")
    check(out.attention is not None and out.attention.shape == (3, 2, 32, 32), "open(): /attention")
    check(out.attrs.get("format") == "attnbatch-output" and not out.packed, f"open(): provenance {out.attrs.get('format')!r}")
    packed = attnbatch.open(packed_out, split=True)
    check(packed.packed and len(packed.output) == 3, "open(split=True): not three sequences")
    for s, n in enumerate(lengths):
        check(np.array_equal(packed.output[s], out.output[s, :n]), f"open(split=True): sequence {s} of the packed output")
        check(np.array_equal(packed.lse[s], out.lse[s, :, :n]), f"open(split=True): lse of sequence {s}")
    try:
        import xarray  # noqa: F401
    except ImportError:
        print("xarray is not installed: to_xarray() not checked")
    else:
        ds = attnbatch.open(packed_out).to_xarray()
        check(ds["output"].dims == ("T", "D_out") and ds.attrs.get("sequence_layout") == "packed", "to_xarray(): packed")
        ds = out.to_xarray()
        check(ds["output"].shape == (3, 32, 64) and "attention" in ds, "to_xarray(): padded")
        # The dims to_xarray() names are those of the file's dimension scales, as xarray's own
        # reader (engine h5netcdf) finds them.
        try:
            import h5netcdf  # noqa: F401
        except ImportError:
            print("h5netcdf is not installed: to_xarray()'s dims not compared with the file's")
        else:
            for path in (padded_out, packed_out):
                with xarray.open_dataset(path, engine="h5netcdf") as from_file:
                    mine = attnbatch.open(path).to_xarray()
                    for name in ("output", "lse", "lengths", "offsets", "attention"):
                        if name in from_file:
                            check(name in mine and mine[name].dims == from_file[name].dims,
                                  f"to_xarray() of {os.path.basename(path)}: /{name} dims "
                                  f"{mine[name].dims if name in mine else None} against the file's {from_file[name].dims}")
    check_tiles_warning()
    print(repr(out), repr(packed))
    return exit_status()


def check_tiles_warning():
    """bf16 warns when Linux refused the AMX tiles (as run's header says), and only then."""
    import warnings
    x = np.random.default_rng(3).standard_normal((2, 16, 32)).astype(np.float32)
    cpu_flags = open("/proc/cpuinfo").read().split()
    refusal = attnbatch._core.bf16_tiles_refused()
    if "amx_bf16" not in cpu_flags:
        check(refusal == "", f"bf16_tiles_refused() on a CPU without AMX: {refusal!r}, expected ''")
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            attnbatch.attention(x, heads=2, precision="bf16")
    except attnbatch.UsageError as e:
        print(f"bf16 warning not checked (no bf16 here): {e}")
        return
    mine = [w for w in seen if issubclass(w.category, RuntimeWarning) and "AMX" in str(w.message)]
    check(len(mine) == (1 if refusal else 0), f"bf16 with the tiles refused={refusal!r}: warnings {[str(w.message) for w in seen]}")
    # The refusal as Linux gives it on an old kernel, put in the module's place: the warning
    # names it and points at the caller's line.
    saved = attnbatch._core.bf16_tiles_refused
    attnbatch._core.bf16_tiles_refused = lambda: "Linux refused the tile state (arch_prctl ARCH_REQ_XCOMP_PERM: Invalid argument)"
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            attnbatch.attention(x, heads=2, precision="bf16")
            attnbatch.attention(x, heads=2)  # fp32 never warns
    finally:
        attnbatch._core.bf16_tiles_refused = saved
    messages = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
    check(len(messages) == 1 and "without the CPU's AMX tiles" in messages[0] and "Invalid argument" in messages[0],
          f"bf16 with a refusal: RuntimeWarnings {messages}, expected one naming it")
    check(len(seen) == 1 and seen[0].filename == __file__,
          f"the warning points at {[w.filename for w in seen]}, expected the caller's file {__file__}")


if __name__ == "__main__":
    sys.exit(main())
