#!/usr/bin/python3
"""Bad input to the Python module raises clear exceptions: the class of the command line's
exit code, that code, and a one-line message naming what was wrong and what was expected.

usage: errors_test.py WORKDIR
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, exit_status, fresh_directory  # noqa: E402

import attnbatch  # noqa: E402


def raises(what, kind, words, call):
    try:
        call()
    except kind as e:
        message = str(e)
        print(f"{what}: {type(e).__name__}: {message}")
        check("\n" not in message, f"{what}: the message is not one line")
        for word in words:
            check(word in message, f"{what}: the message lacks {word!r}")
        return e
    except Exception as e:  # noqa: BLE001
        check(False, f"{what}: raised {type(e).__name__}: {e}, expected {kind.__name__}")
        return None
    check(False, f"{what}: raised nothing, expected {kind.__name__}")
    return None


def main():
    work = sys.argv[1]
    fresh_directory(work)
    x = np.zeros((2, 16, 32), dtype=np.float32)
    raises("wrong ndim", attnbatch.UsageError, ["x", "(1, 2, 16, 32)", "[N, L, d]"], lambda: attnbatch.attention(x[None]))
    raises("wrong dtype", TypeError, ["float64", "float32 or float16"], lambda: attnbatch.attention(x.astype(np.float64)))
    raises("not an array", TypeError, ["numpy array"], lambda: attnbatch.attention([[1.0]]))
    raises("non-contiguous", attnbatch.UsageError, ["not C-contiguous", "np.ascontiguousarray"],
           lambda: attnbatch.attention(x[:, ::2]))
    raises("Fortran order", attnbatch.UsageError, ["not C-contiguous"], lambda: attnbatch.attention(np.asfortranarray(x)))
    e = raises("lengths > L", attnbatch.InvalidInputError, ["lengths[1] = 17", "L = 16"],
               lambda: attnbatch.attention(x, lengths=[16, 17]))
    check(e is None or (e.exit_code == 3 and isinstance(e, ValueError)), "lengths > L: not exit code 3 / ValueError")
    raises("negative length", attnbatch.InvalidInputError, ["lengths[0] = -1"], lambda: attnbatch.attention(x, lengths=[-1, 3]))
    raises("lengths count", attnbatch.UsageError, ["2 integers"], lambda: attnbatch.attention(x, lengths=[3]))
    e = raises("heads not dividing d", attnbatch.UsageError, ["heads=3", "32"], lambda: attnbatch.attention(x, heads=3))
    check(e is None or e.exit_code == 2, "heads: not exit code 2")
    raises("k without v", attnbatch.UsageError, ["k and v"], lambda: attnbatch.attention(x, x))
    raises("k of another L", attnbatch.InvalidInputError, ["k has shape"],
           lambda: attnbatch.attention(x, x[:, :8].copy(), x))
    raises("kv_heads not dividing", attnbatch.UsageError, ["kv_heads=3"],
           lambda: attnbatch.attention(x, x, x, heads=4, kv_heads=3))
    raises("heads as text", attnbatch.UsageError, ["heads='2'", "integer"], lambda: attnbatch.attention(x, heads="2"))
    raises("heads fractional", attnbatch.UsageError, ["heads=2.5", "integer"], lambda: attnbatch.attention(x, heads=2.5))
    raises("heads past int", attnbatch.UsageError, ["heads=%d" % 2**40, "out of range"],
           lambda: attnbatch.attention(x, heads=2**40))
    raises("threads beyond any node", attnbatch.UsageError, ["threads=100000", "1 to 1024"],
           lambda: attnbatch.attention(x, threads=100000))
    raises("precision", attnbatch.UsageError, ["--precision", "fp32|bf16"], lambda: attnbatch.attention(x, precision="fp8"))
    os.environ["ATTNBATCH_AVX512_ROWS"] = "16"
    raises("ATTNBATCH_AVX512_ROWS", attnbatch.UsageError, ["ATTNBATCH_AVX512_ROWS=16", "expected 8 or 12"],
           lambda: attnbatch.attention(x))
    rng = np.random.default_rng(3)
    ragged = rng.standard_normal((3, 53, 64)).astype(np.float32)
    same = {}
    for rows in ("8", "12"):  # the same bits with either tile (where there is no AVX-512, the portable kernel twice)
        os.environ["ATTNBATCH_AVX512_ROWS"] = rows
        same[rows] = attnbatch.attention(ragged, heads=2, causal=True, lengths=[53, 20, 1], return_maps="all")
    del os.environ["ATTNBATCH_AVX512_ROWS"]
    for eight, twelve in zip(same["8"], same["12"]):
        check(np.asarray(eight).tobytes() == np.asarray(twelve).tobytes(), "ATTNBATCH_AVX512_ROWS 8 and 12 differ")
    check(np.isfinite(np.asarray(same["8"][0])).all(), "ATTNBATCH_AVX512_ROWS: non-finite output")
    raises("return_maps", attnbatch.UsageError, ["return_maps"], lambda: attnbatch.attention(x, return_maps="some"))
    raises("projections missing w_v", attnbatch.UsageError, ["w_v"],
           lambda: attnbatch.attention(x, projections={"w_q": np.eye(32), "w_k": np.eye(32)}))
    raises("projections of another d", attnbatch.InvalidInputError, ["w_q", "d = 32"],
           lambda: attnbatch.attention(x, projections={"w_q": np.eye(8), "w_k": np.eye(8), "w_v": np.eye(8)}))
    e = raises("missing weights file", attnbatch.FileError, ["nowhere.h5"],
               lambda: attnbatch.attention(x, projections=os.path.join(work, "nowhere.h5")))
    check(e is None or e.exit_code == 4, "missing weights file: not exit code 4")

    # run(): the command line's parser and checks, its exit codes as classes.
    e = raises("run: missing input", attnbatch.FileError, ["nowhere.h5"],
               lambda: attnbatch.run(os.path.join(work, "nowhere.h5"), os.path.join(work, "out.h5")))
    check(e is None or e.exit_code == 4, "run: missing input: not exit code 4")
    raises("run: unknown option", attnbatch.UsageError, ["no-such-option"],
           lambda: attnbatch.run("in.h5", "out.h5", no_such_option=3))
    bad = os.path.join(work, "bad.h5")
    with open(bad, "w") as f:
        f.write("not HDF5")
    e = raises("run: not HDF5", attnbatch.InvalidInputError, ["bad.h5"], lambda: attnbatch.run(bad, os.path.join(work, "o.h5")))
    check(e is None or e.exit_code == 3, "run: not HDF5: not exit code 3")
    raises("run: comm of another kind", TypeError, ["mpi4py"], lambda: attnbatch.run(bad, "o.h5", comm=object()))

    # open(): h5py's own KeyError or OSError came out before.
    e = raises("open: missing file", attnbatch.FileError, ["nowhere.h5"], lambda: attnbatch.open(os.path.join(work, "nowhere.h5")))
    check(e is None or e.exit_code == 4, "open: missing file: not exit code 4")
    raises("open: not HDF5", attnbatch.InvalidInputError, ["bad.h5", "not an HDF5 file"], lambda: attnbatch.open(bad))
    other = os.path.join(work, "other.h5")
    import h5py
    with h5py.File(other, "w") as f:
        f["embeddings"] = np.zeros((2, 4, 8), np.float32)
    e = raises("open: not an output", attnbatch.InvalidInputError, ["other.h5", "not an attnbatch output", "/output"],
               lambda: attnbatch.open(other))
    check(e is None or e.exit_code == 3, "open: not an output: not exit code 3")
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
