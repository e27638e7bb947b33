#!/usr/bin/python3
"""`run --dry-run` exits with the code of the real run (docs/formats.md: for everything that can be known
before the first write), and writes nothing.

usage: dry_run_preflight_test.py ATTNBATCH MPIEXEC WORKDIR

Each case sets up a failure (or a success) of the real run, runs the same command line with
--dry-run and without, and asserts: both exit with the expected code; the dry run changed no
file of the case's directory (names, sizes, modification times); the real run left no OUTPUT
when it failed. The one check a dry run skips, the value scan (it reads all the data), is the
last case: there the dry run says 0 and the real run 3, as documented. The table of codes is
printed (and written to WORKDIR/table.md). Cases that need root (tmpfs mounts, setpriv) fail
when they cannot be set up, as the test machines run as root.
"""
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, failures, fresh_directory, mpi_env, mpirun, run_with_timeout  # noqa: E402

TIMEOUT = 120
ENV = {k: v for k, v in mpi_env().items() if not k.startswith("ATTNBATCH_")}
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


class Skip(Exception):
    """A case this machine cannot set up (a feature it lacks): reported, not failed."""


class Case:
    def __init__(self, binary, root, name):
        self.binary, self.name = binary, name
        self.dir = os.path.join(root, name)
        fresh_directory(self.dir)
        os.chmod(self.dir, 0o755)
        self.input = self.path("in.h5")
        self.output = self.path("out.h5")
        self.mounts = []

    def path(self, *names):
        return os.path.join(self.dir, *names)

    def attnbatch(self, *args, env=None, prefix=()):
        environment = dict(ENV)
        environment.update(env or {})
        done = run_with_timeout([*prefix, self.binary, *args], TIMEOUT, env=environment, cwd=self.dir)
        if done is None:
            raise RuntimeError("attnbatch %s: no exit within %d s" % (" ".join(args), TIMEOUT))
        return done

    def generate(self, path=None, n=6, length=8, d=8, extra=()):
        done = self.attnbatch("generate", "--output", path or self.input, "--num-seqs", str(n), "--seq-len", str(length),
                              "--dim", str(d), "--min-len", "2", *extra)
        if done.returncode != 0:
            raise RuntimeError("generate failed: " + done.stderr)

    def mount_tmpfs(self, name, options):
        point = self.path(name)
        os.makedirs(point)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", point], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError("cannot mount a tmpfs (%s): %s" % (options, done.stderr.strip()))
        self.mounts.append(point)
        return point

    def cleanup(self):
        for point in reversed(self.mounts):
            subprocess.run(["umount", "-l", point], capture_output=True)

    def snapshot(self):
        state = {}
        for top, _, files in os.walk(self.dir):
            for name in files:
                path = os.path.join(top, name)
                status = os.lstat(path)
                state[path] = (status.st_size, status.st_mtime_ns)
        return state


def run_args(c, *extra):
    # Relative to the case's directory (the runs start there), for short messages.
    return ["run", "--input", os.path.relpath(c.input, c.dir), "--output", os.path.relpath(c.output, c.dir),
            "--progress", "never", "--threads", "1", *extra]


# Each case: (description, expected code, set-up returning (args, env, prefix, mpi ranks)).
def output_exists(c):
    c.generate()
    with open(c.output, "w") as f:
        f.write("an earlier result\n")
    return run_args(c)


def partial_exists(c):
    c.generate()
    with open(c.output + ".partial", "w") as f:
        f.write("left by an interrupted run\n")
    return run_args(c)


def output_directory_missing(c):
    c.generate()
    c.output = c.path("missing", "out.h5")
    return run_args(c)


def output_directory_missing_gzip(c):
    c.generate()
    c.output = c.path("missing", "out.h5")
    return run_args(c, "--compression", "gzip")


def output_is_a_directory(c):
    c.generate()
    os.makedirs(c.output)
    return run_args(c)


def output_is_the_input(c):
    c.generate()
    c.output = c.input
    return run_args(c, "--force")


def output_directory_read_only(c):
    c.generate()
    c.output = os.path.join(c.mount_tmpfs("ro", "ro,size=1m"), "out.h5")
    return run_args(c)


def output_directory_not_writable(c):
    c.generate()
    os.chmod(c.input, 0o644)
    locked = c.path("locked")
    os.makedirs(locked)
    os.chmod(locked, 0o555)
    c.output = os.path.join(locked, "out.h5")
    return run_args(c), {}, NOBODY


def not_enough_space(c):
    c.generate(n=64, length=64, d=16)
    c.output = os.path.join(c.mount_tmpfs("small", "size=512k"), "out.h5")
    return run_args(c)


def unavailable_filter(c):
    x = np.zeros((4, 8, 8), np.float32)
    x[:, :, 0] = 1.0
    with h5py.File(c.input, "w") as f:
        f.create_dataset("embeddings", data=x, compression="lzf")
    return run_args(c)


def heads_do_not_divide(c):
    c.generate()
    return run_args(c, "--heads", "3")


def max_memory_below_one_sequence(c):
    c.generate(length=256, d=32)
    return run_args(c, "--max-memory", "64K")


def sequences_past_n(c):
    c.generate()
    return run_args(c, "--sequences", "4:9")


def weights_seqs_outside_sequences(c):
    c.generate()
    return run_args(c, "--sequences", "2:4", "--weights-seqs", "0:2")


def packed_block_without_tokens(c):
    lengths = [3, 2, 0, 0, 4]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    with h5py.File(c.input, "w") as f:
        f["tokens"] = np.random.default_rng(5).standard_normal((int(offsets[-1]), 8)).astype(np.float32)
        f["offsets"] = offsets
    return run_args(c, "--sequences", "2:4")


def report_directory_missing(c):
    c.generate()
    return run_args(c, "--report", "missing/run.json")


def input_missing(c):
    return run_args(c)


def interrupted(c, *options):
    """A .partial of a run stopped after its first unit (fault injection: exit)."""
    c.generate()
    done = c.attnbatch(*run_args(c, "--unit-sequences", "1", *options), env={"ATTNBATCH_FAULT": "0:after_unit:1:exit"})
    if done.returncode == 0 or not os.path.exists(c.output + ".partial"):
        raise RuntimeError("the interrupted run left no .partial: exit %d, %s" % (done.returncode, done.stderr))


def resume_partial_other_options(c):
    interrupted(c, "--causal")
    return run_args(c, "--unit-sequences", "1", "--resume")


def resume_partial_same_options(c):
    interrupted(c, "--causal")
    return run_args(c, "--unit-sequences", "1", "--resume", "--causal")


def resume_partial_other_bf16_kernel(c):
    """A bf16 .partial begun by a build whose bf16 kernel rounded otherwise (its identity says
    another bf16 kernel version): finishing it would mix two kernels' bits."""
    probe = c.attnbatch("bench", "--precision", "bf16", "--batch", "1", "--heads", "1", "--seq-len", "8", "--repeats", "1")
    if probe.returncode != 0:
        raise Skip("this CPU runs no bf16 kernel: " + probe.stderr.strip())
    interrupted(c, "--precision", "bf16")
    with h5py.File(c.output + ".partial", "r+") as f:
        identity = f["journal/identity"][()].decode()
        lines = identity.split("\n")
        at = [i for i, line in enumerate(lines) if line.startswith("bf16 kernel version = ")]
        if len(at) != 1:
            raise RuntimeError("the bf16 run's identity has no single bf16 kernel version line:\n" + identity)
        lines[at[0]] = "bf16 kernel version = 14"
        del f["journal/identity"]
        f["journal/identity"] = "\n".join(lines).encode()
    return run_args(c, "--unit-sequences", "1", "--resume", "--precision", "bf16")


def resume_complete_other_options(c):
    c.generate()
    done = c.attnbatch(*run_args(c, "--causal"))
    if done.returncode != 0:
        raise RuntimeError("the first run failed: " + done.stderr)
    return run_args(c, "--resume")


def resume_complete_same_options(c):
    c.generate()
    done = c.attnbatch(*run_args(c, "--causal"))
    if done.returncode != 0:
        raise RuntimeError("the first run failed: " + done.stderr)
    return run_args(c, "--resume", "--causal")


def more_ranks_than_sequences(c):
    c.generate(n=2)
    return run_args(c), {}, (), 3


def output_exists_two_ranks(c):
    c.generate()
    with open(c.output, "w") as f:
        f.write("an earlier result\n")
    return run_args(c), {}, (), 2


def fresh_run(c):
    c.generate()
    return run_args(c)


def nan_in_input(c):
    with h5py.File(c.input, "w") as f:
        x = np.zeros((4, 8, 8), np.float32)
        x[2, 3, 1] = np.nan
        f["embeddings"] = x
    return run_args(c)


CASES = [
    ("OUTPUT exists, no --force", 2, output_exists),
    ("OUTPUT.partial exists, no --resume/--force", 2, partial_exists),
    ("output directory missing", 4, output_directory_missing),
    ("output directory missing, --compression gzip", 4, output_directory_missing_gzip),
    ("--output is a directory", 2, output_is_a_directory),
    ("--output is the input (with --force)", 2, output_is_the_input),
    ("output directory on a read-only mount", 4, output_directory_read_only),
    ("output directory not writable (as nobody)", 4, output_directory_not_writable),
    ("output larger than the free space", 2, not_enough_space),
    ("input compressed with an unavailable filter (lzf)", 3, unavailable_filter),
    ("--heads does not divide d", 2, heads_do_not_divide),
    ("--max-memory below one sequence", 2, max_memory_below_one_sequence),
    ("--sequences past N", 2, sequences_past_n),
    ("--weights-seqs outside --sequences", 2, weights_seqs_outside_sequences),
    ("--sequences of a packed input, every one empty", 2, packed_block_without_tokens),
    ("--report directory missing", 4, report_directory_missing),
    ("--input missing", 4, input_missing),
    ("--resume of a .partial made with other options", 2, resume_partial_other_options),
    ("--resume of a complete OUTPUT made with other options", 2, resume_complete_other_options),
    ("--resume of a bf16 .partial begun by another bf16 kernel", 2, resume_partial_other_bf16_kernel),
    ("OUTPUT exists, 2 ranks", 2, output_exists_two_ranks),
    ("--resume of a .partial, same options", 0, resume_partial_same_options),
    ("--resume of a complete OUTPUT, same options", 0, resume_complete_same_options),
    ("3 ranks, 2 sequences (idle rank)", 0, more_ranks_than_sequences),
    ("a fresh run", 0, fresh_run),
]
# The value scan reads every byte of the input: the one check a dry run leaves to the run.
SKIPPED_BY_DRY_RUN = ("NaN in the input (value scan)", 0, 3, nan_in_input)


def run_case(binary, mpiexec, root, name, setup, dry_expected, real_expected):
    c = Case(binary, root, setup.__name__)
    try:
        found = setup(c)
        found = list(found) if isinstance(found, tuple) else [found]
        args, env, prefix, ranks = found + [None, {}, (), 1][len(found):]
        if ranks > 1:
            prefix = tuple(mpirun(mpiexec, ranks, [])) + tuple(prefix)
        had_output = os.path.lexists(c.output)
        before = c.snapshot()
        dry = c.attnbatch(*args, "--dry-run", env=env, prefix=prefix)
        check(c.snapshot() == before, "%s: the dry run changed files" % name)
        real = c.attnbatch(*args, env=env, prefix=prefix)
        check(dry.returncode == dry_expected, "%s: dry run exit %d, expected %d: %s" %
              (name, dry.returncode, dry_expected, dry.stderr.strip()))
        check(real.returncode == real_expected, "%s: real run exit %d, expected %d: %s" %
              (name, real.returncode, real_expected, real.stderr.strip()))
        if real_expected != 0 and not had_output:
            check(not os.path.lexists(c.output), "%s: a failed run left OUTPUT" % name)
        errors = [line for line in real.stderr.splitlines() if line.startswith("attnbatch run: error: ")]
        message = errors[0][len("attnbatch run: error: "):] if errors else ""
        check(len(errors) <= 1, "%s: more than one error line: %r" % (name, errors))
        return dry.returncode, real.returncode, message
    except Skip as reason:
        print("%s: skipped: %s" % (name, reason))
        return "skipped", "skipped", str(reason)
    except RuntimeError as error:
        check(False, "%s: cannot be set up: %s" % (name, error))
        return None, None, str(error)
    finally:
        c.cleanup()


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    binary, mpiexec, root = os.path.abspath(sys.argv[1]), sys.argv[2], os.path.abspath(sys.argv[3])
    fresh_directory(root)
    rows = ["| real run fails with | `--dry-run` exit | real run exit | message (real run) |", "| --- | --- | --- | --- |"]
    for name, code, setup in CASES:
        dry, real, message = run_case(binary, mpiexec, root, name, setup, code, code)
        rows.append("| %s | %s | %s | %s |" % (name, dry, real, message[:110] + ("..." if len(message) > 110 else "")))
    name, dry_code, real_code, setup = SKIPPED_BY_DRY_RUN
    dry, real, message = run_case(binary, mpiexec, root, name, setup, dry_code, real_code)
    rows.append("| %s (not a preflight check) | %s | %s | %s |" % (name, dry, real, message[:110]))
    table = "\n".join(rows) + "\n"
    print(table)
    with open(os.path.join(root, "table.md"), "w") as f:
        f.write(table)
    for failure in failures:
        print("FAIL: " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
