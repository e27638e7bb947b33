"""attnbatch from Python: scaled dot-product self-attention on numpy arrays, the batch job
over HDF5 files (on an mpi4py communicator), and its output read back.

    attention(x, heads=4, causal=True)         numpy in, numpy out: the kernels of `run`
    run("in.h5", "out.h5", heads=4, comm=...)  the whole job of `attnbatch run`
    open("out.h5")                             its datasets and provenance

Failures raise AttnbatchError subclasses, one per exit code of the command line: UsageError
(2), InvalidInputError (3), FileError (4), Interrupted (5), InternalError (1).
"""

import os
import warnings
from collections.abc import Mapping

import numpy as np

from ._errors import (AttnbatchError, FileError, InternalError, InvalidInputError, Interrupted,
                      UsageError)
from ._output import Output, open
from . import _core

__all__ = ["attention", "run", "open", "Output", "AttnbatchError", "UsageError",
           "InvalidInputError", "FileError", "Interrupted", "InternalError"]

_PROJECTION_NAMES = ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")


def _operand(array, name):
    """`array` as float32 C-contiguous [N, L, width], read in place when it already is."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name}: expected a numpy array, got {type(array).__name__}")
    if array.ndim not in (2, 3):
        raise UsageError(f"{name} has shape {array.shape} ({array.ndim} axes), expected [N, L, d] "
                         f"or [L, d] (one sequence)")
    if array.dtype not in (np.float32, np.float16):
        raise TypeError(f"{name} has dtype {array.dtype}, expected float32 or float16; hint: "
                        f"{name}.astype(np.float32)")
    if not array.flags.c_contiguous:
        raise UsageError(f"{name} is not C-contiguous (strides {array.strides} for shape "
                         f"{array.shape}); hint: np.ascontiguousarray({name})")
    if array.ndim == 2:
        array = array[np.newaxis]
    if array.shape[0] == 0 or array.shape[1] == 0 or array.shape[2] == 0:
        raise InvalidInputError(f"{name} has shape {array.shape}, expected N, L and d of at least 1")
    if array.dtype == np.float16:
        array = array.astype(np.float32)  # the engine computes in float32: one conversion
    return array


def _lengths(lengths, n, length):
    if lengths is None:
        return np.full(n, length, dtype=np.int32)
    values = np.asarray(lengths)
    if values.ndim == 0:
        values = values.reshape(1)
    if values.shape != (n,) or not np.issubdtype(values.dtype, np.integer):
        raise UsageError(f"lengths has shape {values.shape} and dtype {values.dtype}, expected "
                         f"{n} integers (one per sequence)")
    bad = np.flatnonzero((values < 0) | (values > length))
    if bad.size:
        i = int(bad[0])
        raise InvalidInputError(f"lengths[{i}] = {int(values[i])} is out of range, expected "
                                f"0 <= length <= L = {length}")
    return np.ascontiguousarray(values, dtype=np.int32)


def _projections(projections):
    """(arrays or None, weights file path or "")."""
    if projections is None:
        return None, ""
    if isinstance(projections, (str, bytes, os.PathLike)):
        return None, os.fsdecode(projections)
    if not isinstance(projections, Mapping):
        raise TypeError("projections: expected a dict of arrays (w_q, w_k, w_v[, w_o, b_q, "
                        f"b_k, b_v, b_o]) or a weights file path, got {type(projections).__name__}")
    unknown = sorted(set(projections) - set(_PROJECTION_NAMES))
    if unknown:
        raise UsageError(f"projections has {unknown}, expected keys among {list(_PROJECTION_NAMES)}")
    arrays = {}
    for name in _PROJECTION_NAMES:
        value = projections.get(name)
        if value is None:
            if name in ("w_q", "w_k", "w_v"):
                raise UsageError(f"projections has no '{name}'; expected w_q, w_k and w_v")
            continue
        value = np.asarray(value)
        axes = 2 if name.startswith("w") else 1
        if value.ndim != axes or not np.issubdtype(value.dtype, np.floating):
            raise InvalidInputError(f"projections['{name}'] has shape {value.shape} and dtype "
                                    f"{value.dtype}, expected a float {'matrix' if axes == 2 else 'vector'}")
        arrays[name] = np.ascontiguousarray(value, dtype=np.float32)
    return arrays, ""


def attention(x_or_q, k=None, v=None, *, heads=1, kv_heads=None, causal=False, lengths=None,
              scale=None, rope_theta=None, precision="fp32", projections=None, threads=None,
              return_lse=False, return_maps=None, maps_dtype="float32"):
    """Scaled dot-product self-attention, softmax(Q K^T * scale) V, over a batch of sequences.

    The kernels and dispatch of ``attnbatch run`` (its step compute, not a copy of it): for the
    same data and options the result has the same bits as the run's ``/output``.

    Arguments:
      x_or_q      float32 or float16 array [N, L, d] (or [L, d]: one sequence). Alone, the
                  embeddings: Q = K = V = x split into `heads` heads along d (d = H*d_k),
                  or projected by `projections`. With k and v, the queries [N, L, H*d_k].
      k, v        keys [N, L, G*d_k] and values [N, L, G*d_v]: G K/V heads (G divides H).
      heads       H, query heads. With a weights file, the default 1 takes the file's
                  attribute `heads`.
      kv_heads    G (grouped-query attention); None: from the widths (or the weights).
      causal      mask keys after the query.
      lengths     N ints: sequence n's valid tokens (0 <= len <= L); rows past it are zeros
                  in the output (and -inf in lse). None: all L.
      scale       logit scale; None: 1/sqrt(d_k).
      rope_theta  rotary position embeddings on Q and K with this base (e.g. 10000); None: off.
      precision   "fp32" or "bf16" (bfloat16 products, fp32 accumulation; needs AVX512-BF16
                  or AMX). On an AMX CPU whose Linux refuses the tiles (older than 5.16, a
                  seccomp filter) bf16 runs on AVX512-BF16 and a RuntimeWarning says why.
      projections dict of arrays w_q [d, H*d_k], w_k [d, G*d_k], w_v [d, G*d_v] and
                  optionally w_o [H*d_v, d_out], b_q, b_k, b_v, b_o (row-vector convention,
                  y = x W + b, as in a weights file), or the path of a weights file (what
                  ``run --weights`` reads). Only with embeddings x.
      threads     OpenMP threads; None: OMP_NUM_THREADS, else all cores.
      return_lse  also return the log-sum-exp of each score row, float32 [N, H, L].
      return_maps "all" or "mean" (over heads): also return the attention maps [N, H, L, L]
                  (or [N, 1, L, L]); None: not computed.
      maps_dtype  the maps' dtype: "float32" or "float16" (run's --weights-dtype f32|f16).

    Returns the output, float32 [N, L, D_out] (D_out = H*d_v, or d_out with w_o); with
    return_lse or return_maps, a tuple (output[, lse][, maps]). For [L, d] input the leading
    axis is dropped from each.

    float32 C-contiguous input is read in place (float16 is converted once) and the results
    are handed back without a copy; the GIL is released while the kernels run, so other
    Python threads go on. Non-contiguous input raises UsageError (hint: np.ascontiguousarray);
    other dtypes raise TypeError; shapes that do not fit raise UsageError or InvalidInputError
    with the one-line message of the command line. Values are not scanned for NaN/inf (run
    does that on its input files).

    Example:
      >>> x = np.random.default_rng(0).standard_normal((8, 128, 256), dtype=np.float32)
      >>> y, lse = attnbatch.attention(x, heads=4, causal=True, return_lse=True)
      >>> y.shape, lse.shape
      ((8, 128, 256), (8, 4, 128))
    """
    single = isinstance(x_or_q, np.ndarray) and x_or_q.ndim == 2
    if (k is None) != (v is None):
        raise UsageError("k and v go together: give both (with queries) or neither (embeddings)")
    if k is None:
        x, q = _operand(x_or_q, "x"), None
        first = x
    else:
        if projections is not None:
            raise UsageError("projections project embeddings x and cannot apply to q, k, v; hint: "
                             "drop projections, or give x alone")
        x, q, k, v = None, _operand(x_or_q, "q"), _operand(k, "k"), _operand(v, "v")
        first = q
        for name, other in (("k", k), ("v", v)):
            if other.shape[:2] != q.shape[:2]:
                raise InvalidInputError(f"{name} has shape {other.shape}, expected [N, L, ...] = "
                                        f"[{q.shape[0]}, {q.shape[1]}, ...] like q")
    n, length = first.shape[0], first.shape[1]
    if return_maps not in (None, "all", "mean"):
        raise UsageError(f"return_maps: {return_maps!r} is not one of None, 'all', 'mean'")
    dtypes = {"float32": "f32", "f32": "f32", "float16": "f16", "f16": "f16"}
    dtype_name = np.dtype(maps_dtype).name if not isinstance(maps_dtype, str) else maps_dtype
    if dtype_name not in dtypes:
        raise UsageError(f"maps_dtype: {maps_dtype!r} is not one of 'float32', 'float16'")
    if scale is not None and not scale > 0:
        raise UsageError(f"scale: {scale!r} is not a positive number (None: 1/sqrt(d_k))")
    if rope_theta is not None and not rope_theta > 0:
        raise UsageError(f"rope_theta: {rope_theta!r} is not a positive base (None: off)")
    arrays, weights_path = _projections(projections)
    options = {
        "heads": 0 if weights_path and heads == 1 else _count("heads", heads),
        "kv_heads": 0 if kv_heads is None else _count("kv_heads", kv_heads),
        "causal": bool(causal),
        "scale": 0.0 if scale is None else float(scale),
        "rope_theta": 0.0 if rope_theta is None else float(rope_theta),
        "precision": str(precision),
        "threads": 0 if threads is None else _count("threads", threads),
        "maps": return_maps or "none",
        "maps_dtype": dtypes[dtype_name],
    }
    if threads is not None and int(threads) < 1:
        raise UsageError(f"threads={threads}: expected None (automatic) or a positive count")
    output, lse, maps = _core.attention(x, q, k, v, _lengths(lengths, n, length), options, arrays,
                                        weights_path, bool(return_lse))
    if options["precision"] == "bf16":
        _warn_without_tiles()
    results = [output] + ([lse] if return_lse else []) + ([maps] if return_maps else [])
    if single:
        results = [r[0] for r in results]
    return results[0] if len(results) == 1 else tuple(results)


def _count(name, value):
    """A count argument as an int, refused unless it is an integer that the engine's int holds:
    int() took "2" and 2.7 (as 2), and a value past 2**31 failed in the binding's conversion
    with a RuntimeError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise UsageError(f"{name}={value!r}: expected an integer, not {type(value).__name__}")
    if not -2**31 <= int(value) < 2**31:
        raise UsageError(f"{name}={int(value)}: out of range")
    return int(value)


def _warn_without_tiles():
    """A refused AMX tile state makes bf16 look slow (about 0.7x fp32 on AMX Xeons, where the
    tiles give 2x): say so, as `run` and `bench` do in their first line. ATTNBATCH_NO_AMX, the
    user's own choice, gets no warning."""
    reason = _core.bf16_tiles_refused()
    if reason:
        warnings.warn(f"attnbatch: bf16 runs on AVX512-BF16 without the CPU's AMX tiles: {reason}",
                      RuntimeWarning, stacklevel=3)


def _arguments(options):
    """Keyword options as the command line's arguments: `save_weights="none"` is
    --save-weights=none, `causal=True` is --causal, False and None leave an option out, a list
    repeats it."""
    args = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            args += [f"{flag}={os.fspath(item) if isinstance(item, os.PathLike) else item}" for item in value]
        else:
            args.append(f"{flag}={os.fspath(value) if isinstance(value, os.PathLike) else value}")
    return args


def run(input, output, *, comm=None, **options):
    """The whole job of ``attnbatch run``: plan, steps, journal, resume, signals.

    ``attnbatch.run("in.h5", "out.h5", heads=4, causal=True, save_weights="none")`` is
    ``attnbatch run --input in.h5 --output out.h5 --heads 4 --causal --save-weights none``:
    every option of the command line, named with underscores for its dashes, parsed by the
    command line's own parser (so an unknown option or a bad value raises UsageError with its
    message). True turns a switch on, False or None leaves the option out.

    comm: an mpi4py communicator to run the job on (every rank of it calls run()), for
    example ``MPI.COMM_WORLD.Split(color, key)``; MPI stays as mpi4py set it up (neither
    initialised again nor finalised). None: the process's MPI_COMM_WORLD (one process: no
    MPI traffic), MPI initialised on first use and finalised at interpreter exit.

    While the job runs, SIGINT (Ctrl-C), SIGTERM and SIGUSR1 stop it at its next checkpoint
    (Interrupted; run again with resume=True); the caller's handlers are back afterwards.
    The GIL is released while the job runs. Rank 0 prints what the command prints.

    Raises UsageError (exit code 2), InvalidInputError (3), FileError (4), Interrupted (5)
    or InternalError (1), carrying ``exit_code`` and the one-line ``message``; with several
    ranks, a failure they agree on is raised on every rank, and one that only one rank meets
    inside a collective write ends the job as the command line does (MPI_Abort).

    Returns the output path.
    """
    address = 0
    if comm is not None:
        from mpi4py import MPI
        if not isinstance(comm, MPI.Comm) or comm == MPI.COMM_NULL:
            raise TypeError(f"comm: expected an mpi4py communicator, got {comm!r}")
        address = MPI._addressof(comm)
    args = ["--input", os.fspath(input), "--output", os.fspath(output)] + _arguments(options)
    _core.run(args, address)
    return os.fspath(output)


import atexit as _atexit  # noqa: E402

_atexit.register(_core.finalize_mpi)
