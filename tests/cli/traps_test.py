#!/usr/bin/python3
"""The traps where attnbatch said "fine" and was not (issue: nothing a user can do silently goes
wrong), one case each; every case failed with the binary from before and passes now.

usage: traps_test.py ATTNBATCH WORKDIR CASE

Cases:
  resume_complete_other_options  --resume on a complete OUTPUT made with other options exits 2
                                 naming the option, and leaves OUTPUT byte-identical; with the
                                 same options it still exits 0 doing nothing
  recorded_paths_from_elsewhere  verify and weights, run from another directory, find the
                                 input and weights a run recorded relative to where it ran;
                                 when the files moved, the error names every path tried
  lzf_filter                     an h5py LZF-compressed input: inspect --quick, run --dry-run
                                 and run all exit 3 naming the filter and the remedies, one
                                 line, no HDF5 stack; ATTNBATCH_DEBUG=1 shows the stack
  sequences_selection            run --sequences A:B computes those sequences only (bit for bit
                                 the rows of a whole run), records first_sequence, verifies;
                                 weights and --weights-seqs use input numbers; a list is refused
  packed_sequences_selection     the same with a packed input: /attention's first_sequence counts
                                 in the input's numbers too (it held the output's own row), and
                                 inspect and verify refuse maps outside the output's sequences
  save_weights_bare              a bare --save-weights means all and does not swallow the next
                                 option
  weights_seqs_syntax            --weights-seqs takes n, A:, :B; refused with --save-weights none
  lengths_none                   --lengths none runs every sequence at L tokens though /lengths
                                 exists
  config_did_you_mean            a misspelt INI section or key, and a misspelt option, fail with
                                 exit 2 and a suggestion
  help_defaults                  no "(=0)" default in any subcommand's --help
  bench_head_dim                 bench --head-dim is d_k (as generate --head-dim); the old
                                 --dim still works; ATTNBATCH_DIM does not reach it
  inspect_error_once             an invalid file's error is said once (stderr), not also on stdout
  one_rank_wording               "1 rank", "1 unit", "1 sequence": no "1 ranks"
  maps_inspectable               the file of weights --to maps.h5 is valid for inspect
  stdout_closed                  a run whose stdout reader is gone after one line (`run |
                                 head -1`) finishes its output and exits 0 (SIGPIPE killed it
                                 mid-way, leaving OUTPUT.partial)
  generate_reserved_dataset      generate --dataset naming what the input schema gives another
                                 meaning (/lengths, /offsets, /query, /key, /value; /tokens when
                                 padded) exits 2 naming the option and the meaning, writes nothing
                                 (it wrote the embeddings there, and run then found none)
  config_command_line_only       help, config and print-config in a --config file, for every
                                 subcommand, exit 2 naming the file, line and key (help was
                                 ignored, print-config = false printed); ATTNBATCH_HELP and
                                 ATTNBATCH_PRINT_CONFIG likewise, naming the variable (set to
                                 false, they showed help and printed the options)
  dangling_link_outputs          generate --weights-out naming a dangling link to --output (or the
                                 reverse) exits 2 as two names of one file do, writing nothing
  packed_no_tokens               a packed input whose sequences are all empty (/tokens [0, d]):
                                 run and run --dry-run exit 3 with one line that counts T in
                                 tokens (it said "expected at least 1 sequence" of a file of four)
                                 and names the padded layout, which runs empty sequences
"""
import json
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, digest, failures  # noqa: E402
from command_cases import ENV, TIMEOUT, one_line_error, run_case  # noqa: E402

def resume_complete_other_options(c):
    c.generate("in.h5", "--num-seqs", "6", "--seq-len", "8", "--dim", "8", "--min-len", "2")
    first = c.run("run", "--input", "in.h5", "--output", "out.h5", "--causal", "--progress", "never")
    check(first.returncode == 0, "the first run failed: " + first.stderr)
    before = digest(c.path("out.h5"))
    changed = c.run("run", "--input", "in.h5", "--output", "out.h5", "--resume", "--progress", "never")
    one_line_error(changed, 2, ["out.h5", "causal: recorded true, now false", "--force"], "--resume without --causal")
    check(digest(c.path("out.h5")) == before, "the refused --resume changed out.h5")
    dry = c.run("run", "--input", "in.h5", "--output", "out.h5", "--resume", "--dry-run")
    check(dry.returncode == 2, "--dry-run --resume without --causal: exit %d, expected 2" % dry.returncode)
    same = c.run("run", "--input", "in.h5", "--output", "out.h5", "--resume", "--causal", "--progress", "never")
    check(same.returncode == 0 and "nothing to resume" in same.stdout,
          "--resume with the same options: exit %d, %r" % (same.returncode, same.stdout + same.stderr))
    check(digest(c.path("out.h5")) == before, "--resume with the same options changed out.h5")


def recorded_paths_from_elsewhere(c):
    os.makedirs(c.path("job"))
    os.makedirs(c.path("elsewhere"))
    job = c.path("job")
    c.generate(os.path.join("job", "in.h5"), "--num-seqs", "4", "--seq-len", "8", "--dim", "8", "--heads", "2",
               "--weights-out", c.path("job", "proj.h5"))
    done = c.run("run", "--input", "in.h5", "--weights", "proj.h5", "--heads", "2", "--output", "out.h5",
                 "--save-weights", "none", "--progress", "never", cwd=job)
    check(done.returncode == 0, "run in job/ failed: " + done.stderr)
    with h5py.File(c.path("job", "out.h5"), "r") as f:
        check(f.attrs.get("weights_file") == "proj.h5", "weights_file is %r, expected as given" % f.attrs.get("weights_file"))
        check(f.attrs.get("weights_file_absolute") == c.path("job", "proj.h5"),
              "weights_file_absolute is %r" % f.attrs.get("weights_file_absolute"))
        check(f.attrs.get("input_file_absolute") == c.path("job", "in.h5"),
              "input_file_absolute is %r" % f.attrs.get("input_file_absolute"))
    elsewhere = c.path("elsewhere")
    verify = c.run("verify", "--input", "../job/in.h5", "--output", "../job/out.h5", "--samples", "all", cwd=elsewhere)
    check(verify.returncode == 0, "verify from elsewhere: exit %d, %r" % (verify.returncode, verify.stderr))
    bare = c.run("verify", "--output", "../job/out.h5", cwd=elsewhere)
    check(bare.returncode == 0 and c.path("job", "proj.h5") in bare.stdout,
          "verify without --input from elsewhere: exit %d, %r" % (bare.returncode, bare.stdout + bare.stderr))
    maps = c.run("weights", "--output", "../job/out.h5", "--sequences", "1:3", "--to", "maps.h5", cwd=elsewhere)
    check(maps.returncode == 0, "weights from elsewhere: exit %d, %r" % (maps.returncode, maps.stderr))
    # Moved away: the error names the recorded path and every place it looked.
    shutil.move(c.path("job", "proj.h5"), c.path("proj-moved.h5"))
    lost = c.run("verify", "--input", "../job/in.h5", "--output", "../job/out.h5", cwd=elsewhere)
    one_line_error(lost, 4, ["recorded as 'proj.h5'", c.path("job", "proj.h5"), "--weights"], "verify, weights moved")
    found = c.run("verify", "--input", "../job/in.h5", "--output", "../job/out.h5", "--weights", "../proj-moved.h5",
                  cwd=elsewhere)
    check(found.returncode == 0, "verify --weights after the move: exit %d, %r" % (found.returncode, found.stderr))


def write_lzf(path, lengths_only=False):
    """Compressible data: LZF is an optional filter in h5py, skipped for chunks it cannot shrink."""
    x = np.zeros((4, 8, 8), np.float32)
    x[:, :, 0] = 1.0
    with h5py.File(path, "w") as f:
        if lengths_only:
            f["embeddings"] = x
            f.create_dataset("lengths", data=np.full(4, 8, np.int32), compression="lzf", chunks=(4,))
        else:
            f.create_dataset("embeddings", data=x, compression="lzf")


def lzf_filter(c):
    for name, lengths_only, dataset in (("lzf.h5", False, "/embeddings"), ("lzf-lengths.h5", True, "/lengths")):
        write_lzf(c.path(name), lengths_only)
        fragments = [name, dataset, "filter lzf", "h5repack -f NONE", "HDF5_PLUGIN_PATH"]
        for what, args in (("inspect --quick", ["inspect", name, "--quick"]),
                           ("run --dry-run", ["run", "--input", name, "--output", "o.h5", "--dry-run"]),
                           ("run", ["run", "--input", name, "--output", "o.h5", "--progress", "never"])):
            done = c.run(*args)
            one_line_error(done, 3, fragments, what + " " + name)
            check("<-" not in done.stderr and "H5Z_pipeline" not in done.stderr,
                  "%s %s: an HDF5 stack reached the user: %r" % (what, name, done.stderr))
        check(not os.path.exists(c.path("o.h5")) and not os.path.exists(c.path("o.h5.partial")),
              "a refused run left an output")
    # A damaged file: one frame, not the stack; ATTNBATCH_DEBUG=1 shows every frame.
    with open(c.path("damaged.h5"), "wb") as f:
        f.write(b"\x89HDF\r\n\x1a\n" + b"noise" * 20)
    short = c.run("run", "--input", "damaged.h5", "--output", "o.h5")
    full = c.run("run", "--input", "damaged.h5", "--output", "o.h5", env={"ATTNBATCH_DEBUG": "1"})
    check(short.returncode == 3 and full.returncode == 3, "damaged input: exits %d, %d" % (short.returncode, full.returncode))
    check(short.stderr.count(" <- ") <= 2 and "ATTNBATCH_DEBUG=1" in short.stderr,
          "damaged input: the message should show one frame and the debug switch: %r" % short.stderr)
    check(full.stderr.count(" <- ") > short.stderr.count(" <- "), "ATTNBATCH_DEBUG=1 did not show the stack: %r" % full.stderr)


def sequences_selection(c):
    c.generate("in.h5", "--num-seqs", "10", "--seq-len", "12", "--dim", "8", "--heads", "2", "--min-len", "3")
    whole = c.run("run", "--input", "in.h5", "--output", "whole.h5", "--heads", "2", "--progress", "never")
    check(whole.returncode == 0, "the whole run failed: " + whole.stderr)
    part = c.run("run", "--input", "in.h5", "--output", "part.h5", "--heads", "2", "--sequences", "3:7",
                 "--weights-seqs", "4:6", "--progress", "never")
    check(part.returncode == 0, "run --sequences 3:7 failed: " + part.stderr)
    with h5py.File(c.path("whole.h5"), "r") as w, h5py.File(c.path("part.h5"), "r") as p:
        check(p.attrs["first_sequence"] == 3, "root first_sequence is %r, expected 3" % p.attrs.get("first_sequence"))
        check(p["output"].shape[0] == 4, "/output holds %d sequences, expected 4" % p["output"].shape[0])
        for name in ("output", "lse", "lengths"):
            check(np.array_equal(p[name][...], w[name][3:7], equal_nan=True), "/%s differs from rows 3:7 of the whole run" % name)
        check(p["attention"].attrs["first_sequence"] == 4, "/attention first_sequence should be the input's 4")
        check(np.array_equal(p["attention"][...], w["attention"][4:6]), "/attention differs from sequences 4:6")
        check(list(p.attrs["weights_sequences"]) == [4, 6], "weights_sequences %r" % list(p.attrs["weights_sequences"]))
    inspect = c.run("inspect", "part.h5")
    check(inspect.returncode == 0 and "sequences [3, 7)" in inspect.stdout, "inspect part.h5: %r" % inspect.stdout[-300:])
    verify = c.run("verify", "--input", "in.h5", "--output", "part.h5", "--samples", "all")
    check(verify.returncode == 0, "verify part.h5: exit %d, %r" % (verify.returncode, verify.stdout + verify.stderr))
    maps = c.run("weights", "--input", "in.h5", "--output", "part.h5", "--sequences", "5,6", "--heads", "1:", "--to", "m.h5")
    check(maps.returncode == 0, "weights --sequences 5,6: %r" % maps.stderr)
    outside = c.run("weights", "--input", "in.h5", "--output", "part.h5", "--sequences", "2", "--to", "m2.h5")
    one_line_error(outside, 2, ["sequence 2", "[3, 7)"], "weights of a sequence the output lacks")
    for spelling, first, count in (("8:", 8, 2), (":2", 0, 2), ("9", 9, 1)):
        out = "open-%d.h5" % first
        done = c.run("run", "--input", "in.h5", "--output", out, "--heads", "2", "--sequences", spelling, "--progress", "never")
        check(done.returncode == 0, "--sequences %s: %r" % (spelling, done.stderr))
        if done.returncode == 0:
            with h5py.File(c.path(out), "r") as f:
                check(f.attrs["first_sequence"] == first and f["output"].shape[0] == count,
                      "--sequences %s: first_sequence %r, %d rows" % (spelling, f.attrs["first_sequence"], f["output"].shape[0]))
    listed = c.run("run", "--input", "in.h5", "--output", "list.h5", "--sequences", "1,3")
    one_line_error(listed, 2, ["--sequences", "'1,3'", "one block"], "--sequences with a list")
    past = c.run("run", "--input", "in.h5", "--output", "past.h5", "--sequences", "8:12")
    one_line_error(past, 2, ["--sequences 8:12", "N = 10"], "--sequences past N")


def packed_sequences_selection(c):
    c.generate("in.h5", "--num-seqs", "10", "--seq-len", "12", "--dim", "8", "--heads", "2", "--min-len", "3",
               "--layout", "packed")
    whole = c.run("run", "--input", "in.h5", "--output", "whole.h5", "--heads", "2", "--progress", "never")
    check(whole.returncode == 0, "the whole run failed: " + whole.stderr)
    for name, weights_seqs, first in (("part.h5", ["--weights-seqs", "4:6"], 4), ("all-maps.h5", [], 3)):
        part = c.run("run", "--input", "in.h5", "--output", name, "--heads", "2", "--sequences", "3:7", *weights_seqs,
                     "--progress", "never")
        check(part.returncode == 0, "run --sequences 3:7 %s failed: %s" % (weights_seqs, part.stderr))
        with h5py.File(c.path("whole.h5"), "r") as w, h5py.File(c.path(name), "r") as p:
            offsets = w["offsets"][...]
            rows = slice(int(offsets[3]), int(offsets[7]))
            check(p.attrs["first_sequence"] == 3, "%s: root first_sequence %r, expected 3" % (name, p.attrs.get("first_sequence")))
            check(np.array_equal(p["output"][...], w["output"][rows]), "%s: /output differs from sequences 3:7's rows" % name)
            check(np.array_equal(p["lse"][...], w["lse"][:, rows]), "%s: /lse differs from sequences 3:7's rows" % name)
            got = int(p["attention"].attrs["first_sequence"])
            check(got == first, "%s: /attention first_sequence %d, expected the input's %d" % (name, got, first))
            count = p["attention"].shape[0]
            check(np.array_equal(p["attention"][...], w["attention"][first:first + count]),
                  "%s: /attention differs from the whole run's sequences %d:%d" % (name, first, first + count))
        inspect = c.run("inspect", name)
        check(inspect.returncode == 0 and "sequences [%d, %d)" % (first, first + count) in inspect.stdout,
              "inspect %s: exit %d, %r" % (name, inspect.returncode, inspect.stdout[-300:] + inspect.stderr))
        verify = c.run("verify", "--input", "in.h5", "--output", name, "--samples", "all")
        check(verify.returncode == 0, "verify %s: exit %d, %r" % (name, verify.returncode, verify.stdout + verify.stderr))
    maps = c.run("weights", "--input", "in.h5", "--output", "part.h5", "--sequences", "5", "--to", "m.h5")
    check(maps.returncode == 0, "weights --sequences 5: %r" % maps.stderr)
    # What packed outputs held before: maps said to start at the output's own row 0, that is
    # the input's sequence 0, outside the output's [3, 7).
    shutil.copy(c.path("part.h5"), c.path("tampered.h5"))
    with h5py.File(c.path("tampered.h5"), "r+") as f:
        f["attention"].attrs["first_sequence"] = 0
    tampered = c.run("inspect", "tampered.h5")
    check(tampered.returncode == 3 and "first_sequence = 0" in tampered.stderr and "[3, 7)" in tampered.stderr,
          "inspect of maps outside the output's sequences: exit %d, %r" % (tampered.returncode, tampered.stderr))
    # verify compared the maps of the wrong sequences and said they were off.
    one_line_error(c.run("verify", "--input", "in.h5", "--output", "tampered.h5"), 3,
                   ["tampered.h5", "first_sequence = 0", "[3, 7)"], "verify of maps outside the output's sequences")


def save_weights_bare(c):
    c.generate("in.h5", "--num-seqs", "2", "--seq-len", "8", "--dim", "8")
    done = c.run("run", "--input", "in.h5", "--output", "out.h5", "--save-weights", "--causal", "--progress", "never")
    check(done.returncode == 0, "run --save-weights --causal: exit %d, %r" % (done.returncode, done.stderr))
    with h5py.File(c.path("out.h5"), "r") as f:
        check(f.attrs["save_weights"] == "all", "bare --save-weights stored %r" % f.attrs["save_weights"])
        check(f.attrs["causal"] == 1, "--causal after a bare --save-weights was swallowed")


def weights_seqs_syntax(c):
    c.generate("in.h5", "--num-seqs", "6", "--seq-len", "8", "--dim", "8")
    for spelling, expected in (("3", [3, 4]), ("4:", [4, 6]), (":2", [0, 2])):
        out = "w%s.h5" % spelling.replace(":", "_")
        done = c.run("run", "--input", "in.h5", "--output", out, "--weights-seqs", spelling, "--progress", "never")
        check(done.returncode == 0, "--weights-seqs %s: %r" % (spelling, done.stderr))
        if done.returncode == 0:
            with h5py.File(c.path(out), "r") as f:
                check(list(f.attrs["weights_sequences"]) == expected,
                      "--weights-seqs %s stored %r, expected %r" % (spelling, list(f.attrs["weights_sequences"]), expected))
    ignored = c.run("run", "--input", "in.h5", "--output", "none.h5", "--save-weights", "none", "--weights-seqs", "0:2")
    one_line_error(ignored, 2, ["--weights-seqs", "--save-weights none"], "--weights-seqs with --save-weights none")


def lengths_none(c):
    c.generate("in.h5", "--num-seqs", "3", "--seq-len", "8", "--dim", "8", "--min-len", "2", "--seed", "5")
    done = c.run("run", "--input", "in.h5", "--output", "out.h5", "--lengths", "none", "--progress", "never")
    check(done.returncode == 0, "--lengths none: exit %d, %r" % (done.returncode, done.stderr))
    with h5py.File(c.path("out.h5"), "r") as f:
        check(list(f["lengths"][...]) == [8, 8, 8], "--lengths none wrote /lengths %r" % list(f["lengths"][...]))
    verify = c.run("verify", "--input", "in.h5", "--output", "out.h5")
    check(verify.returncode == 0, "verify of a --lengths none run: %r" % (verify.stdout + verify.stderr))


def config_did_you_mean(c):
    c.generate("in.h5", "--num-seqs", "2", "--seq-len", "8", "--dim", "8")
    with open(c.path("section.ini"), "w") as f:
        f.write("[rnu]\ncausal = true\n")
    one_line_error(c.run("run", "--config", "section.ini", "--input", "in.h5", "--output", "o.h5"), 2,
                   ["section.ini:1", "[rnu]", "did you mean [run]?"], "misspelt section")
    with open(c.path("key.ini"), "w") as f:
        f.write("[run]\ncasual = true\n")
    one_line_error(c.run("run", "--config", "key.ini", "--input", "in.h5", "--output", "o.h5"), 2,
                   ["key.ini:2", "'casual'", "did you mean 'causal'?"], "misspelt key")
    one_line_error(c.run("run", "--input", "in.h5", "--output", "o.h5", "--casual"), 2, ["did you mean '--causal'?"],
                   "misspelt option")
    with open(c.path("good.ini"), "w") as f:
        f.write("# a job\nthreads = 1\n[generate]\nseq-len = 8\n[ run ]\ncausal = true\n")
    done = c.run("run", "--config", "good.ini", "--input", "in.h5", "--output", "o.h5", "--progress", "never")
    check(done.returncode == 0, "a good config with sections was refused: %r" % done.stderr)


def help_defaults(c):
    for command in ("run", "generate", "inspect", "verify", "weights", "bench"):
        done = c.run(command, "--help")
        check(done.returncode == 0, "%s --help failed" % command)
        # A seed of 0 is a seed; elsewhere 0 stood for "automatic" and said nothing.
        zeros = [line for line in done.stdout.splitlines() if "(=0)" in line and "seed" not in line]
        check(not zeros, "%s --help shows a default (=0): %r" % (command, zeros))
    run_help = c.run("run", "--help").stdout
    for meaning in ("1/sqrt(d_k)", "all cores", "(=auto)"):
        check(meaning in run_help, "run --help does not say %r" % meaning)


def bench_head_dim(c):
    def d_k(*args, env=None):
        done = c.run("bench", "--batch", "1", "--heads", "1", "--seq-len", "32", "--repeats", "1", "--threads", "1",
                     "--json", *args, env=env)
        check(done.returncode == 0, "bench %s failed: %r" % (" ".join(args), done.stderr))
        return json.loads(done.stdout)["dim_k"] if done.returncode == 0 else None
    check(d_k("--head-dim", "16") == 16, "bench --head-dim 16 did not give d_k = 16")
    check(d_k("--dim", "24") == 24, "bench's old --dim no longer works")
    check(d_k(env={"ATTNBATCH_DIM": "8"}) == 64, "ATTNBATCH_DIM (generate's d) reached bench's d_k")
    check("--dim " not in c.run("bench", "--help").stdout, "bench --help still lists --dim")


def inspect_error_once(c):
    with h5py.File(c.path("bad.h5"), "w") as f:
        f["embeddings"] = np.zeros((4, 8), np.float32)
    done = c.run("inspect", "bad.h5")
    check(done.returncode == 3, "inspect bad.h5: exit %d" % done.returncode)
    check("expected [N, L, d]" in done.stderr and len(done.stderr.splitlines()) == 1, "stderr: %r" % done.stderr)
    check("expected [N, L, d]" not in done.stdout, "the error is printed twice (also on stdout): %r" % done.stdout)
    check("/embeddings" in done.stdout, "the schema is no longer shown: %r" % done.stdout)


def one_rank_wording(c):
    c.generate("in.h5", "--num-seqs", "1", "--seq-len", "8", "--dim", "8")
    done = c.run("run", "--input", "in.h5", "--output", "o.h5", "--dry-run", "--threads", "1")
    check(done.returncode == 0, "dry run failed: %r" % done.stderr)
    for wrong in ("1 ranks", "1 units", "1 threads", "1 sequences"):
        check(re.search(r"(?<![=\d])" + wrong, done.stdout) is None, "%r in %r" % (wrong, done.stdout))
    check("1 rank x 1 thread" in done.stdout, "no '1 rank x 1 thread' in %r" % done.stdout)


def maps_inspectable(c):
    c.generate("in.h5", "--num-seqs", "3", "--seq-len", "8", "--dim", "8", "--heads", "2")
    check(c.run("run", "--input", "in.h5", "--heads", "2", "--output", "out.h5", "--save-weights", "none",
                "--progress", "never").returncode == 0, "run failed")
    done = c.run("weights", "--input", "in.h5", "--output", "out.h5", "--sequences", "0:2", "--heads", "1", "--to", "maps.h5")
    check(done.returncode == 0, "weights --to maps.h5: %r" % done.stderr)
    inspect = c.run("inspect", "maps.h5")
    check(inspect.returncode == 0 and "valid attention maps" in inspect.stdout,
          "inspect maps.h5: exit %d, %r" % (inspect.returncode, inspect.stdout[-200:] + inspect.stderr))


def with_stdout_closed_after_one_line(c, *args):
    """Runs attnbatch with its stdout a pipe whose reader reads one line and leaves, as `| head -1`."""
    process = subprocess.Popen([c.binary, *args], cwd=c.work, env=dict(ENV), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    first = process.stdout.readline()
    process.stdout.close()
    try:
        _, err = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        failures.append("attnbatch %s: no exit within %d s with its stdout closed" % (" ".join(args), TIMEOUT))
        raise SystemExit(1)
    check(first != b"", "attnbatch %s printed nothing" % " ".join(args))
    return process.returncode, err.decode(errors="replace")


def stdout_closed(c):
    # Enough work that the report's later lines come after the reader has gone.
    c.generate("in.h5", "--num-seqs", "3000", "--seq-len", "128", "--dim", "64", "--heads", "2")
    code, err = with_stdout_closed_after_one_line(c, "run", "--input", "in.h5", "--output", "out.h5", "--threads", "1",
                                                  "--save-weights", "none")
    check(code == 0, "run with stdout closed: exit %d (-13 is SIGPIPE), stderr %r" % (code, err))
    check(os.path.exists(c.path("out.h5")) and not os.path.exists(c.path("out.h5.partial")),
          "run with stdout closed did not publish out.h5: %r" % sorted(os.listdir(c.work)))
    done = c.run("verify", "--output", "out.h5", "--samples", "8")
    check(done.returncode == 0, "verify of the run whose stdout closed: %s %s" % (done.stdout, done.stderr))


def generate_reserved_dataset(c):
    small = ("--num-seqs", "2", "--seq-len", "4", "--dim", "8")
    for extra, name, meaning in (((), "/lengths", "lengths"), ((), "lengths", "lengths"), ((), "/./lengths", "lengths"),
                                 (("--min-len", "2"), "/lengths", "lengths"), ((), "/offsets", "offsets"),
                                 ((), "/query", "queries"), ((), "/key", "keys"), ((), "/value", "values"),
                                 ((), "/tokens", "packed layout"), (("--layout", "packed"), "/offsets", "offsets"),
                                 (("--layout", "packed"), "/lengths", "lengths")):
        done = c.run("generate", "--output", "g.h5", "--dataset", name, *small, *extra)
        one_line_error(done, 2, ["--dataset /" + name.lstrip("/.").lstrip("/"), meaning, "input schema"],
                       "generate --dataset %s %s" % (name, " ".join(extra)))
        check(not os.path.exists(c.path("g.h5")), "generate --dataset %s wrote g.h5" % name)
    # Names the schema leaves free still work, and so do the packed layout's own rows.
    c.generate("x.h5", "--dataset", "/x", *small)
    c.ok("run", "--input", "x.h5", "--dataset", "/x", "--output", "x-out.h5", "--progress", "never")
    c.generate("p.h5", "--layout", "packed", "--dataset", "/tokens", *small)
    c.ok("run", "--input", "p.h5", "--output", "p-out.h5", "--progress", "never")


def config_command_line_only(c):
    for command in ("run", "generate", "inspect", "verify", "weights", "import-weights", "bench"):
        for text, line, key in (("help = true\n", 1, "help"), ("# a job\nhelp=1\n", 2, "help"),
                                ("[%s]\nhelp = true\n" % command, 2, "help"), ("config = other.ini\n", 1, "config"),
                                ("print-config = false\n", 1, "print-config")):
            with open(c.path("job.ini"), "w") as f:
                f.write(text)
            done = c.run(command, "--config", "job.ini")
            one_line_error(done, 2, ["job.ini:%d" % line, "'%s'" % key, "only on the command line"],
                           "%s --config with %r" % (command, text))
            check(not done.stdout, "%s --config with %r printed %r" % (command, text, done.stdout[:200]))
        for variable, key in (("ATTNBATCH_HELP", "help"), ("ATTNBATCH_PRINT_CONFIG", "print-config")):
            for value in ("false", "1"):
                done = c.run(command, env={variable: value})
                one_line_error(done, 2, ["environment variable %s=%s" % (variable, value), "'%s'" % key,
                                         "only on the command line"], "%s with %s=%s" % (command, variable, value))
                check(not done.stdout, "%s with %s=%s printed %r" % (command, variable, value, done.stdout[:200]))


def dangling_link_outputs(c):
    small = ("--num-seqs", "2", "--seq-len", "4", "--dim", "8")
    os.mkdir(c.path("sub"))
    for output, weights, link, target in (("out.h5", "w.h5", "w.h5", "out.h5"), ("o2.h5", "w2.h5", "o2.h5", "w2.h5"),
                                          ("o3.h5", "sub/w3.h5", "sub/w3.h5", "../o3.h5")):
        os.symlink(target, c.path(link))
        for force in ((), ("--force",)):
            done = c.run("generate", "--output", output, "--weights-out", weights, *small, *force)
            one_line_error(done, 2, ["--weights-out " + weights, "same file as --output " + output],
                           "generate --output %s --weights-out %s %s (%s -> %s)" % (output, weights, " ".join(force), link, target))
            check(os.path.islink(c.path(link)) and not os.path.exists(c.path(link)),
                  "generate with %s -> %s replaced the link or wrote its target" % (link, target))
            check(not os.path.exists(c.path(output)) or os.path.islink(c.path(output)), "%s was written" % output)
    c.generate("a.h5", "--weights-out", "b.h5", *small)


def packed_no_tokens(c):
    with h5py.File(c.path("empty.h5"), "w") as f:
        f["tokens"] = np.zeros((0, 8), np.float32)
        f["offsets"] = np.zeros(5, np.int64)
    for dry in ((), ("--dry-run",)):
        done = c.run("run", "--input", "empty.h5", "--output", "out.h5", *dry)
        one_line_error(done, 3, ["empty.h5", "/tokens", "T = 0", "at least 1 token", "every sequence is empty",
                                 "padded layout"], "run %s of a packed input without tokens" % " ".join(dry))
        check(not os.path.exists(c.path("out.h5")) and not os.path.exists(c.path("out.h5.partial")),
              "run %s left an output" % " ".join(dry))


CASES = {case.__name__: case for case in (
    resume_complete_other_options, recorded_paths_from_elsewhere, lzf_filter, sequences_selection, packed_sequences_selection,
    save_weights_bare, weights_seqs_syntax, lengths_none, config_did_you_mean, help_defaults, bench_head_dim,
    inspect_error_once, one_rank_wording, maps_inspectable, stdout_closed, generate_reserved_dataset,
    config_command_line_only, dangling_link_outputs, packed_no_tokens)}


if __name__ == "__main__":
    sys.exit(run_case(__doc__, CASES))
