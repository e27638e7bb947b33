#!/usr/bin/python3
"""Files whose attributes, /config or values are wrong: every command that reads them refuses
them with exit 3 and one line naming the file, what was found and what was expected (they
ended in "internal error", exit 1), and inspect refuses exactly what the other commands refuse
(it called several of them valid). Every case failed with the binary from before.

usage: bad_attributes_test.py ATTNBATCH WORKDIR CASE

Cases:
  weights_attributes  a weights file whose root heads, kv_heads or rope_theta has another
                      type or shape, or whose heads/kv_heads is 0 or negative: inspect (as
                      weights and with an input), run --dry-run and run all exit 3 with the
                      same line (a heads of 0 ran with H = 1)
  output_attributes   an output whose complete, scale, causal, precision, first_sequence, d_k,
                      kv_heads, rope_theta or /attention@mean_over_heads has another type, whose
                      /config records heads = two, a weights-dtype other than its maps', or is
                      no string, or which has no /config: verify and weights exit 3 naming the
                      attribute or /config, and inspect exits 3 too
  weights_values      a weights file with NaN in /w_q, inf in /b_k, a float64 beyond float32's
                      range, or an lzf-compressed /w_q: inspect exits 3 as run does, naming the
                      dataset, index and value (or the filter); inspect --quick skips the value
                      scan and says so, but still refuses the filter
"""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check  # noqa: E402
import command_cases  # noqa: E402
from command_cases import one_line_error, run_case  # noqa: E402

class Context(command_cases.Context):
    def copy(self, source, name, change):
        """A copy of `source` named `name`, changed by change(h5py.File) in place."""
        super().copy(source, name)
        with h5py.File(self.path(name), "r+") as f:
            change(f)
        return name


def refused(done, fragments, what):
    """Exit 3, one line on stderr holding every fragment; returns it from the first fragment on."""
    line = one_line_error(done, 3, fragments, what)
    return line[line.find(fragments[0]):]  # from the file's name on: the prefix names the command


def inspect_refuses(done, fragments, what):
    check(done.returncode == 3, "%s: exit %d, expected 3; %r" % (what, done.returncode, done.stdout[-300:] + done.stderr))
    for fragment in fragments:
        check(fragment in done.stdout + done.stderr, "%s: output lacks %r: %r" % (what, fragment, done.stdout[-400:]))


def set_attribute(name, value, on="/"):
    def change(f):
        f[on].attrs[name] = value
    return change


def weights_attributes(c):
    c.ok("generate", "--output", "in.h5", "--num-seqs", "2", "--seq-len", "4", "--dim", "8", "--heads", "2",
         "--weights-out", "w.h5", "--seed", "1")
    cases = [
        ("heads", "2", ["root attribute heads is a string, expected a positive scalar integer"]),
        ("heads", 2.0, ["root attribute heads is a float64, expected a positive scalar integer"]),
        ("heads", np.array([2, 2]), ["root attribute heads is an int64 array of shape [2], expected a positive scalar integer"]),
        ("heads", 0, ["root attribute heads = 0, expected a positive scalar integer"]),
        ("heads", -2, ["root attribute heads = -2, expected a positive scalar integer"]),
        ("kv_heads", "2", ["root attribute kv_heads is a string, expected a positive scalar integer"]),
        ("kv_heads", 0, ["root attribute kv_heads = 0, expected a positive scalar integer"]),
        ("rope_theta", "10000", ["root attribute rope_theta is a string, expected a scalar number"]),
    ]
    for index, (name, value, fragments) in enumerate(cases):
        w = c.copy("w.h5", "w%d.h5" % index, set_attribute(name, value))
        what = "weights attribute %s = %r" % (name, value)
        if os.path.exists(c.path("o.h5")):
            os.remove(c.path("o.h5"))
        fragments = [w + ": "] + fragments
        inspect_refuses(c.run("inspect", w, "--as", "weights"), fragments, what + ": inspect --as weights")
        lines = [
            refused(c.run("inspect", "in.h5", "--weights", w), fragments, what + ": inspect --weights"),
            refused(c.run("run", "--input", "in.h5", "--weights", w, "--output", "o.h5", "--dry-run", "--progress", "never"),
                    fragments, what + ": run --dry-run"),
            refused(c.run("run", "--input", "in.h5", "--weights", w, "--output", "o.h5", "--progress", "never"),
                    fragments, what + ": run"),
        ]
        check(len(set(lines)) == 1, "%s: inspect, dry run and run disagree: %r" % (what, lines))
        check(not os.path.exists(c.path("o.h5")), what + ": run wrote o.h5")


def replace_config(old, new):
    def change(f):
        text = f["config"][()].decode()
        check(old in text, "the recorded /config lacks %r" % old)
        del f["config"]
        f["config"] = text.replace(old, new)
    return change


def output_attributes(c):
    c.ok("generate", "--output", "in.h5", "--num-seqs", "2", "--seq-len", "4", "--dim", "8", "--seed", "1")
    c.ok("run", "--input", "in.h5", "--output", "out.h5", "--heads", "2", "--progress", "never")
    c.ok("verify", "--output", "out.h5")

    def remove_config(f):
        del f["config"]

    def number_config(f):
        del f["config"]
        f["config"] = 7

    cases = [
        (set_attribute("complete", "1"), ["root attribute complete is a string, expected a scalar integer"]),
        (set_attribute("scale", "0.5"), ["root attribute scale is a string, expected a scalar number"]),
        (set_attribute("causal", "no"), ["root attribute causal is a string, expected a scalar integer"]),
        (set_attribute("precision", 16), ["root attribute precision is an int64, expected a scalar string"]),
        (set_attribute("first_sequence", "0"), ["root attribute first_sequence is a string, expected a scalar integer"]),
        (set_attribute("d_k", "4"), ["root attribute d_k is a string, expected a scalar integer"]),
        (set_attribute("kv_heads", "2"), ["root attribute kv_heads is a string, expected a scalar integer"]),
        (set_attribute("rope_theta", "0"), ["root attribute rope_theta is a string, expected a scalar number"]),
        (set_attribute("mean_over_heads", "0", on="attention"),
         ["attribute mean_over_heads of /attention is a string, expected a scalar integer"]),
        (replace_config("heads = 2", "heads = two"), ["/config records heads = two, expected a positive integer"]),
        (replace_config("weights-dtype = f32  # default", "weights-dtype = f16"),
         ["/config records weights-dtype = f16, expected f32, the dtype of the maps /attention holds"]),
        (number_config, ["/config is an int64, expected a scalar string"]),
        (remove_config, ["no dataset /config, expected the run's resolved configuration"]),
    ]
    for index, (change, fragments) in enumerate(cases):
        bad = c.copy("out.h5", "bad%d.h5" % index, change)
        what = "%s (%s)" % (bad, fragments[0])
        fragments = [bad + ": "] + fragments
        refused(c.run("verify", "--output", bad), fragments, what + ": verify")
        refused(c.run("weights", "--output", bad, "--to", "maps%d.h5" % index), fragments, what + ": weights")
        inspect_refuses(c.run("inspect", bad), fragments[1:], what + ": inspect")


def weights_values(c):
    c.ok("generate", "--output", "in.h5", "--num-seqs", "2", "--seq-len", "4", "--dim", "8", "--heads", "2",
         "--weights-out", "w.h5", "--seed", "1")
    c.ok("generate", "--output", "in64.h5", "--num-seqs", "2", "--seq-len", "4", "--dim", "8", "--heads", "2",
         "--weights-out", "w64.h5", "--seed", "1", "--dtype", "float64")

    def nan(f):
        f["w_q"][0, 0] = np.nan

    def inf(f):
        f["b_k"][3] = np.inf

    def huge(f):
        f["w_v"][1, 2] = 1e300

    def lzf(f):
        q = f["w_q"][...]
        del f["w_q"]
        f.create_dataset("w_q", data=q, chunks=(2, 8), compression="lzf")

    cases = [
        ("w.h5", "in.h5", nan, ["dataset /w_q has a non-finite value (nan) at [0, 0]"], True),
        ("w.h5", "in.h5", inf, ["dataset /b_k has a non-finite value (inf) at [3]"], True),
        ("w64.h5", "in64.h5", huge, ["dataset /w_v has the value 1e+300 at [1, 2], beyond float32's range"], True),
        ("w.h5", "in.h5", lzf, ["dataset /w_q is compressed with the HDF5 filter lzf"], False),
    ]
    for index, (source, data, change, fragments, scanned) in enumerate(cases):
        w = c.copy(source, "bad%d.h5" % index, change)
        what = "%s (%s)" % (w, fragments[0])
        fragments = [w + ": "] + fragments
        run = refused(c.run("run", "--input", data, "--weights", w, "--output", "o.h5", "--progress", "never"),
                      fragments, what + ": run")
        for args in ([w], [w, "--as", "weights"]):
            inspected = c.run("inspect", *args)
            inspect_refuses(inspected, fragments, what + ": inspect " + " ".join(args[1:]))
            check(run in inspected.stdout + inspected.stderr, "%s: inspect does not say what run says: %r" % (what, run))
        quick = c.run("inspect", w, "--quick")
        if scanned:
            check(quick.returncode == 0 and "values not scanned (--quick)" in quick.stdout,
                  "%s: inspect --quick: exit %d, %r" % (what, quick.returncode, quick.stdout[-300:] + quick.stderr))
        else:
            inspect_refuses(quick, fragments, what + ": inspect --quick")
    good = c.ok("inspect", "w.h5")
    check("valid weights" in good.stdout and "not scanned" not in good.stdout, "inspect w.h5: %r" % good.stdout[-300:])


CASES = {case.__name__: case for case in (weights_attributes, output_attributes, weights_values)}


if __name__ == "__main__":
    sys.exit(run_case(__doc__, CASES, Context))
