#!/usr/bin/python3
"""`run --input` on .npy shards read in place (docs/formats.md, ".npy shards"), one CASE per test:

  padded      8 shards [n_i, L, d] + lengths.npy, given as a glob, a directory and a list file:
              /output, /attention, /lse, /lengths byte-identical to the same data in one HDF5
              file, on 1 rank and on 2 ranks with --io gather and parallel
  packed      8 shards [T_i, d] + offsets.npy (sequences crossing shard boundaries), and the
              same with lengths.npy only: byte-identical to /tokens + /offsets in HDF5, 1 and 2 ranks
  dtypes      float16 shards, big-endian float64 shards with --weights, --lengths FILE.npy:
              byte-identical to the same data in HDF5
  no_copy     on a tmpfs with room for the shards, the output and half the shards more, the run
              succeeds: a copy of the input could not have been written beside them; TMPDIR (a
              fresh directory) is empty after the run
  errors      every bad input: exit code, one stderr line naming the shard and the expected
              value, no OUTPUT or OUTPUT.partial, --dry-run exiting alike
  resume      the journal's identity names the shards: --resume of a complete output exits 0
              for the same shards, 2 naming the shard when one is touched or replaced

usage: npy_input_test.py ATTNBATCH MPIEXEC CASE WORKDIR
"""
import os
import pickle
import shutil
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from harness import check, check_same_results, exit_status, fresh_directory, mpi_env, mpirun, run_with_timeout  # noqa: E402

REFERENCE = "the HDF5 input's run"

TIMEOUT = 120
ENV = mpi_env()
L, D = 24, 16


def run(binary, args, ranks=0, mpiexec=None, env=ENV):
    command = [binary, "run", *args, "--progress", "never"]
    if ranks:
        command = mpirun(mpiexec, ranks, command)
    result = run_with_timeout(command, TIMEOUT, env=env)
    if result is None:
        check(False, "%s: no exit within %d s" % (" ".join(args), TIMEOUT))
    return result




def expect_identical(binary, mpiexec, h5_input, npy_inputs, options, work, label):
    """The HDF5 run is the reference; every .npy form on 1 rank, 2 ranks gather and parallel."""
    reference = os.path.join(work, "ref_%s.h5" % label)
    result = run(binary, ["--input", h5_input, "--output", reference, *options])
    if not check(result is not None and result.returncode == 0, "%s: HDF5 run failed: %s" % (label, result and result.stderr)):
        return
    runs = 0
    for form, npy_input, extra in npy_inputs:
        for ranks, io in ((0, None), (2, "gather"), (2, "parallel")):
            name = "%s %s np=%d%s" % (label, form, max(ranks, 1), " io=" + io if io else "")
            output = os.path.join(work, "out.h5")
            args = ["--input", npy_input, "--output", output, "--force", *extra, *options] + (["--io", io] if io else [])
            result = run(binary, args, ranks, mpiexec)
            if result is None or not check(result.returncode == 0, "%s: exit %d: %s" % (name, result.returncode,
                                                                                        result.stderr.strip()[-400:])):
                continue
            check_same_results(reference, output, name, REFERENCE)
            runs += 1
    print("%s: %d .npy runs compared byte for byte with the HDF5 input's run" % (label, runs))


def shard_sizes(rng, count, total):
    cuts = np.sort(rng.choice(np.arange(1, total), count - 1, replace=False))
    return np.diff(np.concatenate([[0], cuts, [total]]))


def save_shards(directory, arrays, prefix="part"):
    os.makedirs(directory, exist_ok=True)
    paths = []
    for i, array in enumerate(arrays):
        # Unpadded numbers: the natural order (part_2 before part_10) must be the data's order.
        path = os.path.join(directory, "%s_%d.npy" % (prefix, i * 5))
        np.save(path, array)
        paths.append(path)
    return paths


def write_list(path, shard_paths):
    base = os.path.dirname(path)
    with open(path, "w") as f:
        f.write("# shards in order\n\n")
        for shard in shard_paths:
            f.write(os.path.relpath(shard, base) + "\n")


def case_padded(binary, mpiexec, work):
    rng = np.random.default_rng(23)
    n = 30
    x = rng.standard_normal((n, L, D)).astype(np.float32)
    lengths = rng.integers(0, L + 1, n).astype(np.int32)
    lengths[3] = L
    shards = np.split(x, np.cumsum(shard_sizes(rng, 8, n))[:-1])
    directory = os.path.join(work, "shards")
    paths = save_shards(directory, shards)
    np.save(os.path.join(directory, "lengths.npy"), lengths)
    write_list(os.path.join(work, "shards.txt"), paths)
    h5_input = os.path.join(work, "in.h5")
    with h5py.File(h5_input, "w") as f:
        f["embeddings"] = x
        f["lengths"] = lengths
    forms = [("glob", os.path.join(directory, "*.npy"), []), ("directory", directory, []),
             ("list", os.path.join(work, "shards.txt"), ["--lengths", os.path.join(directory, "lengths.npy")])]
    expect_identical(binary, mpiexec, h5_input, forms, ["--heads", "2", "--causal", "--unit-sequences", "3"], work, "padded")
    # --dry-run agrees with the run and names the shards' N.
    result = run(binary, ["--input", directory, "--output", os.path.join(work, "dry.h5"), "--dry-run", "--heads", "2"])
    check(result is not None and result.returncode == 0, "padded --dry-run: exit %s" % (result and result.returncode))
    check(not os.path.exists(os.path.join(work, "dry.h5")), "padded --dry-run wrote its output")


def case_packed(binary, mpiexec, work):
    rng = np.random.default_rng(29)
    n = 20
    lengths = rng.integers(0, 2 * L, n).astype(np.int64)
    lengths[0] = 2 * L
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = rng.standard_normal((int(offsets[-1]), D)).astype(np.float32)
    shards = np.split(tokens, np.cumsum(shard_sizes(rng, 8, len(tokens)))[:-1])
    h5_input = os.path.join(work, "in.h5")
    with h5py.File(h5_input, "w") as f:
        f["tokens"] = tokens
        f["offsets"] = offsets
    with_offsets = os.path.join(work, "with_offsets")
    save_shards(with_offsets, shards)
    np.save(os.path.join(with_offsets, "offsets.npy"), offsets)
    with_lengths = os.path.join(work, "with_lengths")
    save_shards(with_lengths, shards)
    np.save(os.path.join(with_lengths, "lengths.npy"), lengths.astype(np.int32))
    both = os.path.join(work, "both")
    save_shards(both, shards)
    np.save(os.path.join(both, "offsets.npy"), offsets)
    np.save(os.path.join(both, "lengths.npy"), lengths)
    forms = [("offsets", os.path.join(with_offsets, "*.npy"), []), ("lengths", with_lengths, []), ("both", both, [])]
    expect_identical(binary, mpiexec, h5_input, forms, ["--heads", "4", "--unit-sequences", "3"], work, "packed")


def case_dtypes(binary, mpiexec, work):
    rng = np.random.default_rng(31)
    n, heads, d_k = 12, 2, 8
    lengths = rng.integers(1, L + 1, n).astype(np.int64)
    weights = os.path.join(work, "w.h5")
    with h5py.File(weights, "w") as f:
        for name in ("w_q", "w_k", "w_v"):
            f[name] = (rng.standard_normal((D, heads * d_k)) / np.sqrt(D)).astype(np.float32)
    for dtype, order in ((np.float16, "<"), (np.float64, ">"), (np.float32, ">")):
        x = rng.standard_normal((n, L, D)).astype(np.dtype(dtype).newbyteorder(order))
        label = "%s%s" % (order, np.dtype(dtype).name)
        directory = os.path.join(work, label)
        save_shards(directory, np.split(x, [2, 5, 9]))
        side = os.path.join(work, "len_%s.npy" % np.dtype(dtype).name)
        np.save(side, lengths)
        h5_input = os.path.join(work, "in_%s.h5" % np.dtype(dtype).name)
        with h5py.File(h5_input, "w") as f:
            f["embeddings"] = x.astype(np.dtype(dtype).newbyteorder("<"))
            f["lengths"] = lengths
        extra = ["--lengths", side]
        forms = [(label, directory, extra)]
        options = ["--weights", weights] if dtype == np.float64 else ["--heads", "4"]
        expect_identical(binary, mpiexec, h5_input, forms, options + ["--save-weights", "mean"], work, label)


def case_no_copy(binary, mpiexec, work):
    rng = np.random.default_rng(37)
    n, length, d = 256, 64, 64  # 4 MiB of float32 input in 8 shards
    x = rng.standard_normal((n, length, d)).astype(np.float32)
    scratch = os.path.join(work, "scratch")
    os.makedirs(scratch)
    save_shards(scratch, np.split(x, 8))
    reference = os.path.join(scratch, "sized.h5")
    result = run(binary, ["--input", scratch, "--output", reference, "--save-weights", "none"])
    if not check(result is not None and result.returncode == 0, "no_copy: sizing run failed: %s" % (result and result.stderr)):
        return
    input_bytes = sum(os.path.getsize(os.path.join(scratch, f)) for f in os.listdir(scratch) if f.endswith(".npy"))
    output_bytes = os.path.getsize(reference)
    room = input_bytes + output_bytes + input_bytes // 2
    point = os.path.join(work, "tmpfs")
    os.makedirs(point)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % room, "tmpfs", point], capture_output=True, text=True)
    if mounted.returncode != 0:
        check(False, "no_copy: cannot mount a tmpfs (root needed, as on the test machines): %s" % mounted.stderr.strip())
        return
    try:
        shards = os.path.join(point, "shards")
        os.makedirs(shards)
        save_shards(shards, np.split(x, 8))
        # TMPDIR cannot be on the small tmpfs (Open MPI keeps its session files there); it is a
        # fresh directory that must be empty again after the run.
        tmp = os.path.join(work, "tmp")
        os.makedirs(tmp)
        output = os.path.join(point, "out.h5")
        result = run(binary, ["--input", os.path.join(shards, "*.npy"), "--output", output, "--save-weights", "none"],
                     env=dict(ENV, TMPDIR=tmp))
        check(result is not None and result.returncode == 0,
              "no_copy: the run on a tmpfs with room for the input, the output and half the input more failed: %s" %
              (result and result.stderr.strip()))
        stat = os.statvfs(point)
        used = (stat.f_blocks - stat.f_bfree) * stat.f_frsize
        check(os.listdir(tmp) == [], "no_copy: files left in TMPDIR: %s" % os.listdir(tmp))
        check(sorted(os.listdir(point)) == ["out.h5", "shards"], "no_copy: files beside the output: %s" % os.listdir(point))
        check_same_results(reference, output, "no_copy", REFERENCE)
        print("no_copy: input %d bytes, output %d bytes, tmpfs of %d bytes, %d used after the run" %
              (input_bytes, output_bytes, room, used))
    finally:
        subprocess.run(["umount", point])


def case_errors(binary, mpiexec, work):
    rng = np.random.default_rng(41)
    good = [rng.standard_normal((3, L, D)).astype(np.float32) for _ in range(3)]

    def shard_set(name, arrays=None, lengths=None, offsets=None):
        directory = os.path.join(work, name)
        save_shards(directory, good if arrays is None else arrays)
        if lengths is not None:
            np.save(os.path.join(directory, "lengths.npy"), lengths)
        if offsets is not None:
            np.save(os.path.join(directory, "offsets.npy"), offsets)
        return directory

    def with_file(name, index, write):
        directory = shard_set(name)
        write(os.path.join(directory, "part_%d.npy" % (index * 5)))
        return directory

    def raw_npy(header, payload=b""):
        def write(path):
            text = header.encode()
            pad = 64 - (10 + len(text) + 1) % 64
            with open(path, "wb") as f:
                f.write(b"\x93NUMPY\x01\x00" + (len(text) + pad + 1).to_bytes(2, "little") + text + b" " * pad + b"\n" + payload)
        return write

    nan_shards = [a.copy() for a in good]
    nan_shards[2][1, 5, 7] = np.nan
    # float64 shards go through the value scan, which decides 65536 elements at a time: each
    # shard holds 76800, and the culprits lie past its first piece.
    wide = [rng.standard_normal((200, L, D)) for _ in range(2)]
    nan_wide, big_wide = [a.copy() for a in wide], [a.copy() for a in wide]
    nan_wide[1][180, 3, 9] = np.nan
    big_wide[0][199, 23, 15] = -1e39
    packed = [rng.standard_normal((10, D)).astype(np.float32) for _ in range(2)]
    cases = [
        ("other d", shard_set("other_d", good[:2] + [good[2][:, :, :8].copy()]), [], 3, ["part_10.npy", "d = 8", "expected d = 16"]),
        ("other L", shard_set("other_l", good[:2] + [good[2][:, :5].copy()]), [], 3, ["part_10.npy", "L = 5", "expected L = 24"]),
        ("other dtype", shard_set("other_dtype", good[:1] + [good[1].astype(np.float64)] + good[2:]), [], 3,
         ["part_5.npy", "float64", "expected float32"]),
        ("other rank", shard_set("other_rank", good[:2] + [good[2].reshape(-1, D)]), [], 3, ["part_10.npy", "[n_i, L, d]"]),
        ("integer data", shard_set("int_data", good[:1] + [np.ones((3, L, D), np.int32)]), [], 3,
         ["part_5.npy", "int32", "expected float32, float64 or float16"]),
        ("fortran order", with_file("fortran", 1, lambda p: np.save(p, np.asfortranarray(good[1]))), [], 3,
         ["part_5.npy", "Fortran order"]),
        ("object array", with_file("objects", 1, lambda p: np.save(p, np.array([None, 1.0], dtype=object), allow_pickle=True)),
         [], 3, ["part_5.npy", "Python objects"]),
        ("pickle", with_file("pickle", 1, lambda p: open(p, "wb").write(pickle.dumps(good[1]))), [], 3,
         ["part_5.npy", "Python pickle"]),
        ("npz", with_file("npz", 1, lambda p: np.savez(open(p, "wb"), a=good[1])), [], 3, ["part_5.npy", "zip archive"]),
        ("truncated", with_file("truncated", 2, lambda p: open(p, "wb").write(open(
            os.path.join(work, "other_d", "part_0.npy"), "rb").read()[:-100])), [], 3, ["part_10.npy", "bytes of data"]),
        ("structured", with_file("structured", 0, raw_npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
                                                          b"\0" * 4)), [], 3, ["part_0.npy", "structured dtype"]),
        ("extra key", with_file("extra_key", 0, raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1, }",
                                                        b"\0" * 4)), [], 3, ["part_0.npy", "'x'"]),
        ("lengths above L", shard_set("long", lengths=np.full(9, L + 1, np.int32)), [], 3, ["lengths.npy[0] = 25", "exceeds L = 24"]),
        ("lengths count", shard_set("count", lengths=np.full(8, 2, np.int32)), [], 3, ["lengths.npy", "expected [N] = [9]"]),
        ("lengths float", shard_set("float_len", lengths=np.full(9, 2.0)), [], 3, ["lengths.npy", "expected an integer type"]),
        ("lengths option not npy", shard_set("plain"), ["--lengths", "/lengths"], 2, ["--lengths /lengths", ".npy file"]),
        ("packed without sequences", shard_set("packed_bare", packed), [], 3, ["need their sequences", "offsets.npy"]),
        ("packed offsets end", shard_set("packed_end", packed, offsets=np.array([0, 5, 19])), [], 3,
         ["offsets.npy[2] = 19", "expected T = 20"]),
        ("packed lengths sum", shard_set("packed_sum", packed, lengths=np.array([5, 5, 5])), [], 3, ["sums to 15", "expected T = 20"]),
        ("packed disagree", shard_set("packed_both", packed, lengths=np.array([5, 15]), offsets=np.array([0, 10, 20])), [], 3,
         ["lengths.npy[0] = 5", "gives sequence 0 10 rows"]),
        ("non-finite", shard_set("nan", nan_shards), [], 3, ["part_10.npy", "non-finite", "[1, 5, 7]"]),
        ("non-finite float64", shard_set("nan64", nan_wide), [], 3, ["part_5.npy", "non-finite", "[180, 3, 9]"]),
        ("beyond float32", shard_set("big64", big_wide), [], 3, ["part_0.npy", "beyond float32's range", "[199, 23, 15]"]),
        ("no match", os.path.join(work, "nowhere", "*.npy"), [], 4, ["matches no .npy shard"]),
        ("empty directory", shard_set("empty", []), [], 4, ["no .npy shards"]),
        ("query with shards", shard_set("qkv"), ["--query", "/q", "--key", "/k", "--value", "/v"], 2, ["--query", ".npy shards"]),
        ("dataset with shards", shard_set("dataset"), ["--dataset", "/other"], 2, ["--dataset /other", "drop --dataset"]),
    ]
    with open(os.path.join(work, "list.txt"), "w") as f:
        f.write("plain/part_0.npy\nplain/part_0.npy\n")
    cases.append(("list twice", os.path.join(work, "list.txt"), [], 3, ["line 2", "second time"]))
    for label, input_path, extra, code, needles in cases:
        output = os.path.join(work, "out_%s.h5" % label.replace(" ", "_"))
        for dry in (False, True):
            if dry and label in ("non-finite", "non-finite float64", "beyond float32"):
                continue  # --dry-run skips the value scan (run --help)
            result = run(binary, ["--input", input_path, "--output", output, *extra] + (["--dry-run"] if dry else []))
            name = label + (" --dry-run" if dry else "")
            if result is None:
                continue
            lines = result.stderr.strip().splitlines()
            check(result.returncode == code, "%s: exit %d, expected %d: %s" % (name, result.returncode, code, result.stderr.strip()))
            check(len(lines) == 1, "%s: %d stderr lines, expected one: %r" % (name, len(lines), result.stderr))
            for needle in needles:
                check(needle in result.stderr, "%s: stderr lacks %r: %s" % (name, needle, result.stderr.strip()))
            check(not os.path.exists(output) and not os.path.exists(output + ".partial"), "%s: an output was left" % name)
            if not dry:
                print("%-26s exit %d: %s" % (label, result.returncode, lines[0] if lines else ""))


def case_resume(binary, mpiexec, work):
    rng = np.random.default_rng(43)
    directory = os.path.join(work, "shards")
    paths = save_shards(directory, [rng.standard_normal((4, L, D)).astype(np.float32) for _ in range(4)])
    output = os.path.join(work, "out.h5")
    args = ["--input", os.path.join(directory, "*.npy"), "--output", output]
    result = run(binary, args)
    if not check(result is not None and result.returncode == 0, "resume: first run failed: %s" % (result and result.stderr)):
        return
    result = run(binary, args + ["--resume"])
    check(result is not None and result.returncode == 0, "resume: same shards: exit %s, expected 0: %s" %
          (result and result.returncode, result and result.stderr.strip()))
    with h5py.File(output, "r") as f:
        identity = f["journal/identity"][()].decode() if "journal" in f else ""
    check("input shard 3 = " + os.path.realpath(paths[3]) in identity, "resume: the identity does not name shard 3: %s" % identity)
    stat = os.stat(paths[2])
    os.utime(paths[2], ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    result = run(binary, args + ["--resume"])
    check(result is not None and result.returncode == 2 and "input shard 2.modified" in result.stderr,
          "resume: touched shard: exit %s, expected 2 naming 'input shard 2.modified': %s" %
          (result and result.returncode, result and result.stderr.strip()))
    os.utime(paths[2], ns=(stat.st_atime_ns, stat.st_mtime_ns))
    result = run(binary, args + ["--resume"])
    check(result is not None and result.returncode == 0, "resume: restored mtime: exit %s" % (result and result.returncode))
    replacement = os.path.join(work, "replacement.npy")
    np.save(replacement, rng.standard_normal((4, L, D)).astype(np.float32))
    os.replace(replacement, paths[1])
    result = run(binary, args + ["--resume"])
    check(result is not None and result.returncode == 2 and "input shard 1" in result.stderr,
          "resume: replaced shard: exit %s, expected 2 naming 'input shard 1': %s" %
          (result and result.returncode, result and result.stderr.strip()))
    np.save(os.path.join(directory, "part_99.npy"), rng.standard_normal((1, L, D)).astype(np.float32))
    result = run(binary, args + ["--resume"])
    check(result is not None and result.returncode == 2, "resume: a shard added: exit %s, expected 2: %s" %
          (result and result.returncode, result and result.stderr.strip()))


CASES = {"padded": case_padded, "packed": case_packed, "dtypes": case_dtypes, "no_copy": case_no_copy,
         "errors": case_errors, "resume": case_resume}


def main():
    if len(sys.argv) != 5 or sys.argv[3] not in CASES:
        print(__doc__)
        return 2
    binary, mpiexec, case, work = sys.argv[1:]
    fresh_directory(work)
    CASES[case](binary, mpiexec, work)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
