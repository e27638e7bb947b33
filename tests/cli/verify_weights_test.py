#!/usr/bin/env python3
"""verify and weights refuse what they cannot vouch for, one test per case:

  verify_nan              a NaN at a valid position of /lse or /output, or in a map, fails verify
                          (exit 3) and the report says so; the untouched output passes
  weights_nan_lse         a NaN or infinite /lse value of a row that sees keys: weights refuses
                          (exit 3, naming sequence, head and row) and writes no maps
  verify_lengths          an output whose /lengths differs from the input's (one value lowered), is
                          missing, float-typed or of another shape fails verify with exit 3
  verify_samples_syntax   --samples takes a whole count or 'all': '3abc' is refused (exit 2)
  verify_maps_dtype       /config's weights-dtype disagreeing with /attention's dtype: exit 3,
                          one line, not an internal error
  weights_mismatch        weights from an input with other lengths, or weights of another d_k,
                          than the output records: exit 3 naming what differs, no maps written
  weights_other_values    weights given a weights file of the run's shapes but other values (another
                          seed) than the run's: exit 3 naming the file, no maps (it wrote wrong
                          maps, exit 0); the run's file passes; an output recording no weights
                          hash (an older one) does not demand it; a run without weights demands none
                          and refuses weights of its shapes
  weights_sequences_past  weights --sequences past the end of a run --sequences output names
                          the output's sequences, not the input's N
  weights_to_source       weights --to naming the output, input or weights it reads: exit 2 even
                          with --force, the file unchanged

Usage: verify_weights_test.py ATTNBATCH WORKDIR CASE
"""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, digest  # noqa: E402
from command_cases import one_line_error, run_case  # noqa: E402

def verify_nan(c):
    c.ok("generate", "--output", "in.h5", "--num-seqs", "2", "--seq-len", "8", "--dim", "8", "--min-len", "4", "--seed", "1")
    c.ok("run", "--input", "in.h5", "--output", "out.h5", "--heads", "2", "--progress", "never")
    c.ok("verify", "--output", "out.h5", "--samples", "all")
    with h5py.File(c.path("out.h5"), "r") as f:
        valid = int(f["lengths"][0])
    # The last valid row of sequence 0: a position verify compares with a finite reference.
    for dataset, index in (("lse", (0, 1, valid - 1)), ("output", (0, valid - 1, 3)), ("attention", (0, 1, 0, 0))):
        for bad in (np.nan, np.inf):
            name = c.copy("out.h5", "bad-%s.h5" % dataset)
            with h5py.File(c.path(name), "r+") as f:
                f[dataset][index] = bad
            done = c.run("verify", "--output", name, "--samples", "all")
            what = "verify with %s in /%s%s" % (bad, dataset, index)
            check(done.returncode == 3, "%s: exit %d, expected 3; %r %r" % (what, done.returncode, done.stdout, done.stderr))
            check("FAILED" in done.stdout and "OK" not in done.stdout, "%s: %r" % (what, done.stdout))
            line = [l for l in done.stdout.splitlines() if l.strip().startswith(dataset)]
            check(len(line) == 1 and "inf" in line[0] and "1 NaN or infinite" in line[0],
                  "%s: the report does not show it: %r" % (what, done.stdout))


def weights_nan_lse(c):
    """weights wrote the NaN (or 0, or inf) rows a damaged /lse gives, with exit 0."""
    c.ok("generate", "--output", "in.h5", "--num-seqs", "2", "--seq-len", "8", "--dim", "8", "--min-len", "4", "--seed", "1")
    c.ok("run", "--input", "in.h5", "--output", "out.h5", "--heads", "2", "--save-weights", "none", "--progress", "never")
    c.ok("weights", "--output", "out.h5", "--sequences", "1", "--to", "good.h5")
    with h5py.File(c.path("out.h5"), "r") as f:
        valid = int(f["lengths"][1])
    for bad in (np.nan, np.inf, -np.inf):
        name = c.copy("out.h5", "bad.h5")
        with h5py.File(c.path(name), "r+") as f:
            f["lse"][1, 1, valid - 1] = bad
        one_line_error(c.run("weights", "--output", name, "--sequences", "1", "--to", "maps.h5", "--force"), 3,
                       ["/lse", "sequence 1, head 1, row %d" % (valid - 1), "expected a finite value"],
                       "weights with %s in /lse" % bad)
        check(not os.path.exists(c.path("maps.h5")), "weights with %s in /lse wrote maps" % bad)


def verify_lengths(c):
    c.ok("generate", "--output", "in.h5", "--num-seqs", "3", "--seq-len", "8", "--dim", "8", "--min-len", "2", "--seed", "1")
    c.ok("run", "--input", "in.h5", "--output", "out.h5", "--progress", "never")
    c.ok("verify", "--output", "out.h5", "--samples", "all")
    with h5py.File(c.path("in.h5"), "r") as f:
        lengths = f["lengths"][...]
    for sequence in (0, 2):  # 2: not one --samples 1 recomputes; every length is compared
        name = c.copy("out.h5", "lowered-%d.h5" % sequence)
        with h5py.File(c.path(name), "r+") as f:
            f["lengths"][sequence] = lengths[sequence] - 1
        done = c.run("verify", "--output", name, "--samples", "1")
        one_line_error(done, 3, ["/lengths", "sequence %d" % sequence, str(lengths[sequence] - 1), str(lengths[sequence])],
                       "verify of /lengths[%d] lowered" % sequence)
    for label, change in (("missing", lambda f: f.__delitem__("lengths")),
                          ("float", lambda f: (f.__delitem__("lengths"), f.create_dataset("lengths", data=lengths.astype("f4")))),
                          ("shape", lambda f: (f.__delitem__("lengths"), f.create_dataset("lengths", data=np.stack([lengths, lengths]))))):
        name = c.copy("out.h5", "lengths-%s.h5" % label)
        with h5py.File(c.path(name), "r+") as f:
            change(f)
        one_line_error(c.run("verify", "--output", name, "--samples", "all"), 3, ["/lengths", "expected an integer [3]"],
                       "verify with /lengths %s" % label)


def verify_samples_syntax(c):
    c.ok("generate", "--output", "in.h5", "--num-seqs", "4", "--seq-len", "4", "--dim", "8", "--seed", "1")
    c.ok("run", "--input", "in.h5", "--output", "out.h5", "--progress", "never")
    for text in ("3abc", "3.5", "-2", "0", " 3", "+3", ""):
        one_line_error(c.run("verify", "--output", "out.h5", "--samples", text), 2, ["--samples", "'%s'" % text],
                       "verify --samples %r" % text)
    check("3 of 4 sequences" in c.ok("verify", "--output", "out.h5", "--samples", "3").stdout, "--samples 3 no longer counts 3")


def verify_maps_dtype(c):
    c.ok("generate", "--output", "in.h5", "--num-seqs", "2", "--seq-len", "4", "--dim", "8", "--seed", "1")
    for dtype, other in (("f32", "f16"), ("f16", "f32")):
        out = "out-%s.h5" % dtype
        c.ok("run", "--input", "in.h5", "--output", out, "--heads", "2", "--weights-dtype", dtype, "--progress", "never")
        c.ok("verify", "--output", out)
        name = c.copy(out, "bad-%s.h5" % dtype)
        with h5py.File(c.path(name), "r+") as f:
            text = f["config"][()].decode()
            lines = [l for l in text.splitlines() if l.startswith("weights-dtype = ")]
            check(len(lines) == 1, "no weights-dtype line in /config: %r" % text)
            del f["config"]
            f["config"] = text.replace(lines[0], "weights-dtype = " + other)
        one_line_error(c.run("verify", "--output", name), 3, ["/attention", "/config", "weights-dtype = " + other],
                       "verify with /config weights-dtype %s on %s maps" % (other, dtype))


def weights_mismatch(c):
    c.ok("generate", "--output", "in.h5", "--num-seqs", "3", "--seq-len", "8", "--dim", "8", "--heads", "2", "--min-len", "1",
         "--weights-out", "w.h5", "--seed", "1")
    c.ok("generate", "--output", "other.h5", "--num-seqs", "3", "--seq-len", "8", "--dim", "8", "--seed", "2")
    c.ok("generate", "--output", "x.h5", "--num-seqs", "3", "--seq-len", "8", "--dim", "8", "--heads", "2", "--head-dim", "2",
         "--weights-out", "w2.h5", "--seed", "2")
    c.ok("run", "--input", "in.h5", "--weights", "w.h5", "--output", "out.h5", "--save-weights", "none", "--progress", "never")
    with h5py.File(c.path("in.h5"), "r") as f:
        lengths = f["lengths"][...]
    with h5py.File(c.path("out.h5"), "r") as f:
        d_k = int(f.attrs["d_k"])
    with h5py.File(c.path("w2.h5"), "r") as f:
        d_k2 = f["w_q"].shape[1] // 2
    check(d_k2 != d_k, "the test's weights have the run's d_k %d" % d_k)
    c.ok("weights", "--output", "out.h5", "--sequences", "0:3", "--to", "good.h5")
    short = int(np.argmax(lengths < 8))
    check(lengths[short] < 8, "the test's input has no sequence shorter than L: %r" % lengths)
    done = c.run("weights", "--output", "out.h5", "--input", "other.h5", "--sequences", "0:3", "--to", "m1.h5")
    one_line_error(done, 3, ["/lengths", "sequence %d" % short, str(lengths[short]), "other.h5"], "weights from another input")
    check(not os.path.exists(c.path("m1.h5")), "weights from another input wrote m1.h5")
    done = c.run("weights", "--output", "out.h5", "--weights", "w2.h5", "--sequences", "0:3", "--to", "m2.h5")
    one_line_error(done, 3, ["d_k = %d" % d_k, "d_k = %d" % d_k2, "w2.h5"], "weights with weights of another d_k")
    check(not os.path.exists(c.path("m2.h5")), "weights with other weights wrote m2.h5")


def weights_sequences_past(c):
    c.ok("generate", "--output", "in.h5", "--num-seqs", "6", "--seq-len", "4", "--dim", "8", "--seed", "1")
    c.ok("run", "--input", "in.h5", "--output", "part.h5", "--sequences", "2:5", "--progress", "never")
    for text, sequence in (("1", 1), ("5", 5), ("4:6", 5), ("3,5", 5), ("0:3", 0)):
        one_line_error(c.run("weights", "--output", "part.h5", "--sequences", text, "--to", "m.h5"), 2,
                       ["sequence %d is not in" % sequence, "part.h5", "[2, 5)"], "weights --sequences %s" % text)
    c.ok("weights", "--output", "part.h5", "--sequences", "3:", "--to", "m.h5")
    with h5py.File(c.path("m.h5"), "r") as f:
        check(list(f["attention"].attrs["sequences"]) == [3, 4], "--sequences 3: gave %r" % list(f["attention"].attrs["sequences"]))
    one_line_error(c.run("weights", "--output", "part.h5", "--sequences", "7", "--to", "m7.h5"), 2,
                   ["sequence 7 is not in", "[2, 5)"], "weights --sequences 7 (past the input too)")


def weights_to_source(c):
    c.ok("generate", "--output", "in.h5", "--num-seqs", "2", "--seq-len", "4", "--dim", "8", "--heads", "2",
         "--weights-out", "w.h5", "--seed", "1")
    c.ok("run", "--input", "in.h5", "--weights", "w.h5", "--output", "out.h5", "--save-weights", "none", "--progress", "never")
    os.symlink("out.h5", c.path("link.h5"))
    for to, fragment in (("out.h5", "--output"), ("./link.h5", "--output"), ("in.h5", "the input"), ("w.h5", "the weights")):
        before = {name: digest(c.path(name)) for name in ("out.h5", "in.h5", "w.h5")}
        one_line_error(c.run("weights", "--output", "out.h5", "--to", to, "--force"), 2, ["--to " + to, fragment, "same file"],
                       "weights --to %s --force" % to)
        for name, value in before.items():
            check(digest(c.path(name)) == value, "weights --to %s --force changed %s" % (to, name))
    c.ok("verify", "--output", "out.h5")


def weights_other_values(c):
    shape = ("--num-seqs", "3", "--seq-len", "8", "--dim", "8", "--heads", "2", "--min-len", "2")
    c.ok("generate", "--output", "in.h5", *shape, "--weights-out", "w.h5", "--seed", "1")
    c.ok("generate", "--output", "x.h5", *shape, "--weights-out", "w2.h5", "--seed", "2")
    c.ok("run", "--input", "in.h5", "--weights", "w.h5", "--output", "out.h5", "--save-weights", "none", "--progress", "never")
    done = c.run("weights", "--output", "out.h5", "--weights", "w2.h5", "--sequences", "0:3", "--to", "m.h5")
    one_line_error(done, 3, ["w2.h5", "differ", "the run used"], "weights with weights of other values")
    check(not os.path.exists(c.path("m.h5")), "weights with weights of other values wrote m.h5")
    c.ok("weights", "--output", "out.h5", "--weights", "w.h5", "--sequences", "0:3", "--to", "good.h5")
    c.ok("weights", "--output", "out.h5", "--sequences", "0:3", "--to", "recorded.h5")
    # An output whose identity has no weights hash (written before it was recorded) cannot be
    # checked: the weights are taken as given, as they were.
    with h5py.File(c.path("out.h5"), "r+") as f:
        identity = f["journal/identity"][()]
        identity = identity.decode() if isinstance(identity, bytes) else identity
        attributes = dict(f["journal/identity"].attrs)
        del f["journal/identity"]
        f["journal/identity"] = "".join(line for line in identity.splitlines(True) if not line.startswith("weights xxh3"))
        for name, value in attributes.items():
            f["journal/identity"].attrs[name] = value
    c.ok("weights", "--output", "out.h5", "--weights", "w.h5", "--sequences", "0:3", "--to", "old.h5")
    # A run without weights demands none, and refuses some of its shapes.
    c.ok("run", "--input", "in.h5", "--output", "plain.h5", "--heads", "2", "--save-weights", "none", "--progress", "never")
    c.ok("weights", "--output", "plain.h5", "--sequences", "0:3", "--to", "plain-maps.h5")
    done = c.run("weights", "--output", "plain.h5", "--weights", "w.h5", "--sequences", "0:3", "--to", "plain-w.h5")
    one_line_error(done, 3, ["--weights w.h5", "no projection weights"], "weights with weights for a run without")
    check(not os.path.exists(c.path("plain-w.h5")), "weights with weights for a run without wrote plain-w.h5")


CASES = {case.__name__: case for case in (verify_nan, weights_nan_lse, verify_lengths, verify_samples_syntax, verify_maps_dtype,
                                          weights_mismatch, weights_sequences_past, weights_to_source,
                                          weights_other_values)}


if __name__ == "__main__":
    sys.exit(run_case(__doc__, CASES))
