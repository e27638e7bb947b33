#!/usr/bin/python3
"""Outputs that netCDF readers open with names (docs/formats.md "dimension scales"): xarray's h5netcdf
engine opens a run's output without phony_dims and shows the dims N, L, D_out of /output, N,
H, L of /lse, N, H, L, L_k of /attention (N_w and H_mean for a subset or the mean), N of
/lengths, with the values h5py reads (a packed output: T, D_out of /output, H, T of /lse, N+1 of
/offsets); the provenance attributes d_k, d_v, kv_heads,
weights_file and the absolute input path; h5py's dimension labels and `inspect` still work.
Also for an output written collectively by two ranks (--io parallel).

usage: xarray_output_test.py ATTNBATCH MPIEXEC WORKDIR
"""
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, failures, fresh_directory, mpi_env, mpirun, skip  # noqa: E402

try:
    import h5netcdf  # noqa: E402,F401  (the engine xarray opens the outputs with)
    import xarray  # noqa: E402
except ImportError as error:
    skip("no xarray with h5netcdf for %s (python3-xarray, python3-h5netcdf): %s" % (sys.executable, error))


def run(command, expect=0):
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=mpi_env())
    check(result.returncode == expect, "%s: exit %d: %s" % (" ".join(command[:4]), result.returncode, result.stderr[-400:]))
    return result


def check_output(path, weights_dims, weights_sizes, label):
    with xarray.open_dataset(path, engine="h5netcdf") as ds, h5py.File(path, "r") as f:
        expected = {"output": ("N", "L", "D_out"), "lse": ("N", "H", "L"), "lengths": ("N",), "attention": weights_dims}
        for name, dims in expected.items():
            check(ds[name].dims == dims, "%s: /%s has dims %r, expected %r" % (label, name, ds[name].dims, dims))
            check(np.array_equal(ds[name].values, f[name][()], equal_nan=True), "%s: xarray and h5py read different /%s" % (label, name))
        n, length = f["output"].shape[:2]
        sizes = {"N": n, "L": length, "D_out": f["output"].shape[2], "H": f["lse"].shape[1], "L_k": length}
        sizes.update(weights_sizes)
        for dim, size in sizes.items():
            check(ds.sizes.get(dim) == size, "%s: dim %s has size %r, expected %d" % (label, dim, ds.sizes.get(dim), size))
        check(set(ds.data_vars) == {"output", "lse", "lengths", "attention", "config"},
              "%s: variables %s (the scales must be dimensions, not variables)" % (label, sorted(ds.data_vars)))
        check([d.label for d in f["output"].dims] == ["N", "L", "D"], "%s: h5py labels of /output changed" % label)
        attrs = f.attrs
        check(int(attrs["d_k"]) == 8 and int(attrs["d_v"]) == 8 and int(attrs["kv_heads"]) == 4,
              "%s: d_k/d_v/kv_heads %r %r %r" % (label, attrs.get("d_k"), attrs.get("d_v"), attrs.get("kv_heads")))
        check(os.path.isabs(attrs["input_file_absolute"]) and os.path.isabs(attrs["weights_file_absolute"]),
              "%s: input_file_absolute %r, weights_file_absolute %r are not absolute"
              % (label, attrs["input_file_absolute"], attrs["weights_file_absolute"]))
        check(ds.attrs["heads"] == 4, "%s: xarray shows attribute heads %r" % (label, ds.attrs.get("heads")))


def check_packed(path, label):
    with xarray.open_dataset(path, engine="h5netcdf") as ds, h5py.File(path, "r") as f:
        expected = {"output": ("T", "D_out"), "lse": ("H", "T"), "offsets": ("N+1",), "lengths": ("N",)}
        if "attention" in f:
            expected["attention"] = ("N", "H", "L", "L_k")
        for name, dims in expected.items():
            check(ds[name].dims == dims, "%s: /%s has dims %r, expected %r" % (label, name, ds[name].dims, dims))
            check(np.array_equal(ds[name].values, f[name][()], equal_nan=True), "%s: xarray and h5py read different /%s" % (label, name))
        tokens, n = f["output"].shape[0], f["lengths"].shape[0]
        sizes = {"T": tokens, "N": n, "N+1": n + 1, "D_out": f["output"].shape[1], "H": f["lse"].shape[0]}
        for dim, size in sizes.items():
            check(ds.sizes.get(dim) == size, "%s: dim %s has size %r, expected %d" % (label, dim, ds.sizes.get(dim), size))
        check(int(f["offsets"][-1]) == tokens, "%s: /offsets ends at %d, not at T = %d" % (label, int(f["offsets"][-1]), tokens))
        check(set(ds.data_vars) == set(expected) | {"config"},
              "%s: variables %s (the scales must be dimensions, not variables)" % (label, sorted(ds.data_vars)))
        check([d.label for d in f["output"].dims] == ["T", "D"], "%s: h5py labels of /output changed" % label)


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    binary, mpiexec, work = sys.argv[1:]
    fresh_directory(work)
    os.chdir(work)  # relative paths on the command line: the output records absolute ones
    run([binary, "generate", "--output", "in.h5", "--weights-out", "w.h5", "--num-seqs", "13", "--seq-len", "24",
         "--min-len", "0", "--dim", "32", "--heads", "4", "--seed", "9"])
    run([binary, "run", "--input", "in.h5", "--weights", "w.h5", "--causal", "--output", "all.h5"])
    check_output("all.h5", ("N", "H", "L", "L_k"), {}, "serial, all weights")
    run([binary, "run", "--input", "in.h5", "--weights", "w.h5", "--save-weights", "mean", "--weights-seqs", "2:7",
         "--output", "mean.h5"])
    check_output("mean.h5", ("N_w", "H_mean", "L", "L_k"), {"N_w": 5, "H_mean": 1}, "serial, mean of 2:7")
    run(mpirun(mpiexec, 2, [binary, "run", "--input", "in.h5", "--weights", "w.h5", "--causal", "--io", "parallel",
                            "--threads", "1", "--unit-sequences", "2", "--output", "parallel.h5"]))
    check_output("parallel.h5", ("N", "H", "L", "L_k"), {}, "two ranks, --io parallel")
    # A packed output: /output and /lse measure the tokens T, /offsets N+1.
    run([binary, "generate", "--output", "packed_in.h5", "--layout", "packed", "--num-seqs", "9", "--seq-len", "17",
         "--min-len", "1", "--dim", "32", "--seed", "4"])
    run([binary, "run", "--input", "packed_in.h5", "--weights", "w.h5", "--causal", "--save-weights", "all",
         "--output", "packed.h5"])
    check_packed("packed.h5", "serial, packed")
    run(mpirun(mpiexec, 2, [binary, "run", "--input", "packed_in.h5", "--weights", "w.h5", "--io", "parallel",
                            "--threads", "1", "--output", "packed_parallel.h5"]))
    check_packed("packed_parallel.h5", "two ranks, --io parallel, packed")
    inspected = run([binary, "inspect", "parallel.h5"])
    check("dims (N, L, D_out)" in inspected.stdout and "dimension scale" in inspected.stdout,
          "inspect does not show the dims: " + inspected.stdout[:600])
    print("xarray_output: %d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
