#!/usr/bin/python3
"""`attnbatch run` on the hard bad-input cases: full disks, file-size limits, unwritable
directories, locked files, exotic dtypes, bad environment and config values.

usage: run_hard_input_test.py ATTNBATCH WORKDIR [CASE ...]

Every case asserts: the exit code; stderr is one line "attnbatch run: error: ..." containing
the fragments that name what was wrong and what was expected (and the hint where there is
one); no file named OUTPUT afterwards; no OUTPUT.partial unless the run failed after creating
it (then it is reported, never complete); the input, weights and config files byte-identical
(sha256); a pre-existing OUTPUT byte-identical. Every run has a timeout (a hang fails).

Conditions that need privileges (tmpfs mounts, setpriv, prlimit) are set up for real; when one
cannot be set up the case FAILS, it never passes silently. Mounts are undone in `finally`.
"""
import os
import shutil
import subprocess
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import digest  # noqa: E402

USAGE, INVALID, IO = 2, 3, 4
TIMEOUT = 60
BASE_ENV = {k: v for k, v in os.environ.items() if not k.startswith("ATTNBATCH_")}
BASE_ENV.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

failures, passes = [], []


class CaseFailure(Exception):
    pass


class Case:
    def __init__(self, binary, root, name):
        self.binary, self.name = binary, name
        self.dir = os.path.join(root, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        os.chmod(self.dir, 0o755)
        self.input = self.path("in.h5")
        self.output = self.path("out.h5")
        self.mounts = []
        self.guarded = []
        self.notes = []

    def path(self, name):
        return os.path.join(self.dir, name)

    def check(self, condition, message):
        if not condition:
            raise CaseFailure(message)

    # --- set-up helpers ---------------------------------------------------------------------
    def mount_tmpfs(self, name, options):
        point = self.path(name)
        os.makedirs(point, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", point], capture_output=True, text=True)
        if done.returncode != 0:
            return None
        self.mounts.append(point)
        return point

    def cleanup(self):
        for point in reversed(self.mounts):
            subprocess.run(["umount", "-l", point], capture_output=True)
        self.mounts = []

    def embeddings(self, path=None, n=4, length=8, d=8, dtype=np.float32, lengths=None, seed=0):
        rng = np.random.default_rng(seed)
        with h5py.File(path or self.input, "w") as f:
            f["embeddings"] = (0.5 * rng.standard_normal((n, length, d))).astype(dtype)
            if lengths is not None:
                f["lengths"] = lengths
        return path or self.input

    def generate(self, path, n, length, d):
        done = subprocess.run([self.binary, "generate", "--output", path, "--num-seqs", str(n), "--seq-len", str(length),
                               "--dim", str(d)], capture_output=True, text=True, env=BASE_ENV, timeout=TIMEOUT)
        self.check(done.returncode == 0, "generate failed: " + done.stderr)
        return path

    # --- the run and its checks -------------------------------------------------------------
    def run(self, extra, env=None, prefix=None, output=None, inputs=None):
        output = output or self.output
        args = [self.binary, "run", "--input", inputs or self.input, "--output", output, "--progress", "never",
                "--threads", "1"] + extra
        environment = dict(BASE_ENV)
        environment.update(env or {})
        start = time.monotonic()
        try:
            done = subprocess.run((prefix or []) + args, capture_output=True, text=True, env=environment, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            raise CaseFailure("no exit within %d s (a hang)" % TIMEOUT)
        self.elapsed = time.monotonic() - start
        return done

    def expect_rejected(self, extra, code, fragments, env=None, prefix=None, output=None, partial_may_remain=False):
        """Runs and checks everything a rejection promises."""
        output = output or self.output
        partial = output + ".partial"
        guarded = [p for p in [self.input] + self.guarded if os.path.isfile(p)]
        had_output, had_partial = os.path.lexists(output), os.path.lexists(partial)
        if had_output:
            guarded.append(output)
        if had_partial:
            guarded.append(partial)
        before = {p: digest(p) for p in guarded}

        done = self.run(extra, env=env, prefix=prefix, output=output)
        err = done.stderr
        lines = [line for line in err.splitlines() if line.strip()]
        # Open MPI may add its own lines (e.g. a signal forwarded by the singleton's daemon);
        # ours is the one that starts with "attnbatch".
        ours = [line for line in lines if line.startswith("attnbatch")]
        self.check(done.returncode == code, "exit %d, expected %d; stderr: %s" % (done.returncode, code, err.strip()[:2000]))
        self.check(len(ours) == 1, "expected one error line, got %d: %r" % (len(ours), err[:2000]))
        self.check(ours[0].startswith("attnbatch run: error: "), "not an error line: " + ours[0])
        for fragment in fragments:
            self.check(fragment in ours[0], "message lacks %r: %s" % (fragment, ours[0]))
        # Once created, the output is OUTPUT.partial: a failure while writing must name that file
        # (the one --resume continues), not the name it had while it was being created.
        if "cannot create the output" not in ours[0]:
            self.check(".partial.new" not in ours[0], "the message names OUTPUT.partial.new: " + ours[0])
        if not had_output:
            self.check(not os.path.lexists(output), "%s exists after a failed run" % output)
        if not had_partial and os.path.lexists(partial):
            self.check(partial_may_remain, "%s left behind by a run that failed before writing" % partial)
            self.notes.append("OUTPUT.partial remains (%d bytes) after a failure while writing" % os.path.getsize(partial))
        for p, earlier in before.items():
            self.check(os.path.isfile(p) and digest(p) == earlier, "%s was modified" % p)
        self.message = ours[0]
        return ours[0]


# ---------------------------------------------------------------------------------------------
# The cases. Each takes a Case; the file names below are the case names.

def disk_full_precheck(c):
    """Output directory on a 1 MiB tmpfs, output needs 1.5 MiB: the free-space check refuses."""
    c.generate(c.input, 64, 64, 32)
    mount = c.mount_tmpfs("small", "size=1m")
    c.check(mount is not None, "cannot mount a tmpfs (mount -t tmpfs): the case cannot be set up")
    c.expect_rejected([], USAGE, ["out.h5", "needs 1.5 MiB", "1.0 MiB free", "hint:", "--compression gzip"],
                      output=os.path.join(mount, "out.h5"))


def disk_full_while_writing(c):
    """gzip skips the free-space check; incompressible weights fill the 1 MiB tmpfs in H5Dwrite."""
    c.generate(c.input, 256, 64, 32)
    mount = c.mount_tmpfs("small", "size=1m")
    c.check(mount is not None, "cannot mount a tmpfs: the case cannot be set up")
    c.expect_rejected(["--compression", "gzip:1"], IO,
                      ["out.h5.partial", "No space left on device", "errno 28",
                       "hint: the file system is full"],
                      output=os.path.join(mount, "out.h5"), partial_may_remain=True)


def disk_full_at_final_flush(c):
    """Everything fits the chunk cache; the disk fills only when the output is flushed at the
    end. It once crashed (SIGSEGV in HDF5's shutdown), then exited 1 as an internal error."""
    c.generate(c.input, 64, 64, 32)
    mount = c.mount_tmpfs("small", "size=1m")
    c.check(mount is not None, "cannot mount a tmpfs: the case cannot be set up")
    c.expect_rejected(["--compression", "gzip:1"], IO, ["out.h5.partial", "No space left on device", "file system is full"],
                      output=os.path.join(mount, "out.h5"), partial_may_remain=True)


# RLIMIT_FSIZE is inherited by the daemon a singleton MPI_Init starts; its PMIx shared-memory
# store would exceed a small limit (SIGXFSZ), so the hash store is used for these runs.
FSIZE_ENV = {"PMIX_MCA_gds": "hash"}


def file_size_limit_while_writing(c):
    """prlimit --fsize: write() fails with EFBIG (SIGXFSZ ignored) -> exit 4, not killed. Where it
    fails depends on the layout (uncompressed datasets are allocated, and /lse filled, at
    creation), so the message may say create, write or flush; file, errno and hint it must name."""
    c.generate(c.input, 256, 64, 32)
    c.expect_rejected([], IO, ["out.h5.partial", "File too large", "errno 27", "ulimit -f"],
                      prefix=["prlimit", "--fsize=300000"], env=FSIZE_ENV, partial_may_remain=True)


def file_size_limit_at_final_flush(c):
    c.generate(c.input, 64, 64, 32)
    c.expect_rejected([], IO, ["out.h5.partial", "File too large", "ulimit -f"], prefix=["prlimit", "--fsize=300000"],
                      env=FSIZE_ENV, partial_may_remain=True)


def output_dir_read_only_mount(c):
    c.embeddings()
    mount = c.mount_tmpfs("ro", "ro,size=1m")
    c.check(mount is not None, "cannot mount a read-only tmpfs: the case cannot be set up")
    c.expect_rejected([], IO, [os.path.join(mount, "out.h5.partial"), "cannot create the output", "Read-only file system",
                               "hint:"], output=os.path.join(mount, "out.h5"))


AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def without_leak_check():
    """LeakSanitizer checks for leaks at exit by stopping the process and tracing its threads
    (ptrace); a process whose credentials setpriv changed cannot be traced here, and LSan then
    aborts ("LeakSanitizer has encountered a fatal error", exit 1) instead of checking. So in
    the sanitizer build the runs as nobody go without leak checking, visibly and only they;
    ASan's other checks stay on (the variable means nothing to other builds)."""
    asan = os.environ.get("ASAN_OPTIONS", "")
    return {"ASAN_OPTIONS": (asan + ":" if asan else "") + "detect_leaks=0"}


def output_dir_not_writable_unprivileged(c):
    """As root chmod does not stop writes: the run is made as nobody with setpriv."""
    c.embeddings()
    os.chmod(c.input, 0o644)
    locked = c.path("locked")
    os.makedirs(locked)
    os.chmod(locked, 0o555)
    probe = subprocess.run(AS_NOBODY + ["sh", "-c",
                            "touch '%s/x' 2>/dev/null && echo writable || echo denied" % locked],
                           capture_output=True, text=True)
    c.check(probe.returncode == 0 and probe.stdout.strip() == "denied",
            "setpriv as nobody could not be set up (or the directory is writable): %r %r" % (probe.stdout, probe.stderr))
    c.expect_rejected([], IO, [os.path.join(locked, "out.h5.partial"), "Permission denied", "hint: check the permissions"],
                      output=os.path.join(locked, "out.h5"), prefix=AS_NOBODY, env=without_leak_check())


def input_not_readable_unprivileged(c):
    c.embeddings()
    os.chmod(c.input, 0o600)
    c.expect_rejected([], IO, [c.input, "cannot read", "Permission denied", "permissions"], prefix=AS_NOBODY,
                      env=without_leak_check())


def output_exists_is_kept(c):
    c.embeddings()
    with open(c.output, "wb") as f:
        f.write(b"an earlier result, not to be overwritten\n")
    c.expect_rejected([], USAGE, [c.output, "exists", "--force"])


def force_with_bad_input_keeps_earlier_output(c):
    """--force replaces OUTPUT only once the new run is complete: a NaN in the input leaves the
    earlier OUTPUT byte-identical."""
    c.embeddings()
    first = c.run([])
    c.check(first.returncode == 0, "the first run failed: " + first.stderr)
    with h5py.File(c.input, "r+") as f:
        x = f["embeddings"]
        row = x[2]
        row[3, 1] = np.nan
        x[2] = row
    c.expect_rejected(["--force"], INVALID, [c.input, "/embeddings", "nan", "[2, 3, 1]"])


class Holder:
    """A /usr/bin/python3 h5py process holding `path` open with `mode` until stopped."""

    def __init__(self, path, mode, env=None):
        code = ("import h5py, sys, time\nf = h5py.File(sys.argv[1], sys.argv[2])\nprint('open', flush=True)\n"
                "sys.stdin.read()\nf.close()\n")
        self.process = subprocess.Popen([sys.executable, "-c", code, path, mode], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env)
        line = self.process.stdout.readline().strip()
        if line != "open":
            self.stop()
            raise CaseFailure("the h5py holder could not open %s in mode %r" % (path, mode))

    def stop(self):
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def input_held_open_for_writing(c):
    c.embeddings()
    holder = Holder(c.input, "a")
    try:
        c.expect_rejected([], IO, [c.input, "could not lock", "Resource temporarily unavailable", "another process",
                                   "h5py", "HDF5_USE_FILE_LOCKING=FALSE"])
    finally:
        holder.stop()


def weights_held_open_for_writing(c):
    c.embeddings()
    weights = c.path("w.h5")
    rng = np.random.default_rng(1)
    with h5py.File(weights, "w") as f:
        for name in ("w_q", "w_k", "w_v"):
            f[name] = rng.standard_normal((8, 8)).astype(np.float32)
    c.guarded.append(weights)
    holder = Holder(weights, "r+")
    try:
        c.expect_rejected(["--weights", weights], IO, [weights, "could not lock", "another process",
                                                       "HDF5_USE_FILE_LOCKING=FALSE"])
    finally:
        holder.stop()


def partial_held_open_by_another_run(c):
    """OUTPUT.partial being written by another process (held open, locked): refused, kept."""
    c.embeddings()
    partial = c.output + ".partial"
    with h5py.File(partial, "w") as f:
        f["output"] = np.zeros((4, 8, 8), np.float32)
    holder = Holder(partial, "a")
    try:
        c.expect_rejected([], USAGE, [partial, "interrupted run", "--resume", "--force"])
    finally:
        holder.stop()


def partial_held_open_with_force(c):
    """--force must not delete an OUTPUT.partial that another live process is writing (two runs
    on one output). It once unlinked it and wrote its own."""
    c.embeddings()
    partial = c.output + ".partial"
    with h5py.File(partial, "w") as f:
        f["output"] = np.zeros((4, 8, 8), np.float32)
    holder = Holder(partial, "a")
    before = digest(partial)  # as the holder left it: opening for append may touch the file
    try:
        done = c.run(["--force"])
        c.check(done.returncode in (USAGE, IO), "exit %d: %s" % (done.returncode, done.stderr))
        c.check(partial in done.stderr and "another process" in done.stderr, done.stderr)
        c.check(os.path.exists(partial) and digest(partial) == before, "the live OUTPUT.partial was changed")
        c.check(not os.path.exists(c.output), "OUTPUT exists")
    finally:
        holder.stop()


def no_flock_shim(c, errno_name):
    source = c.path("noflock.c")
    with open(source, "w") as f:
        f.write("#include <errno.h>\n#include <sys/file.h>\n"
                "int flock(int fd, int op) { (void)fd; (void)op; errno = %s; return -1; }\n" % errno_name)
    library = c.path("noflock.so")
    built = subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", library, source], capture_output=True, text=True)
    c.check(built.returncode == 0, "cannot build the flock shim (cc): " + built.stderr)
    return library


def preloaded(shim):
    """The environment that preloads `shim`. In the sanitizer build ASan must come first in the
    library list; it is told not to insist (the shim only wraps flock)."""
    asan = os.environ.get("ASAN_OPTIONS", "")
    return {"LD_PRELOAD": shim, "ASAN_OPTIONS": (asan + ":" if asan else "") + "verify_asan_link_order=0"}


def file_locking_unavailable(c):
    """flock() fails with ENOLCK, as on NFS without lockd: the error names the cure."""
    c.embeddings()
    shim = no_flock_shim(c, "ENOLCK")
    c.expect_rejected([], IO, [c.input, "could not lock", "No locks available", "does not support file locks",
                               "HDF5_USE_FILE_LOCKING=FALSE"], env=preloaded(shim))


def file_locking_unavailable_cured_by_the_hint(c):
    """The same, with the hint followed: the run succeeds (a control for the case above)."""
    c.embeddings()
    shim = no_flock_shim(c, "ENOLCK")
    done = c.run([], env=dict(preloaded(shim), HDF5_USE_FILE_LOCKING="FALSE"))
    c.check(done.returncode == 0, "exit %d with HDF5_USE_FILE_LOCKING=FALSE: %s" % (done.returncode, done.stderr))
    c.check(os.path.exists(c.output) and not os.path.exists(c.output + ".partial"), "no complete OUTPUT")


def input_is_a_fifo(c):
    """A FIFO with no writer: opening it would block forever (and SIGTERM did not end it)."""
    os.mkfifo(c.input)
    c.expect_rejected([], IO, [c.input, "is a FIFO", "expected a regular HDF5 file"])
    c.check(c.elapsed < 20, "took %.1f s" % c.elapsed)


def input_is_a_device(c):
    os.symlink("/dev/zero", c.input)
    c.expect_rejected([], IO, [c.input, "is a device", "expected a regular HDF5 file"])


def input_symlink_loop(c):
    os.symlink(c.path("b.h5"), c.input)
    os.symlink(c.input, c.path("b.h5"))
    c.expect_rejected([], IO, [c.input, "Too many levels of symbolic links", "--input"])


def signature_then_garbage(c):
    """The 8-byte HDF5 signature followed by noise: damaged, not I/O."""
    with open(c.input, "wb") as f:
        f.write(b"\x89HDF\r\n\x1a\n" + bytes((i * 37 + 11) % 256 for i in range(4088)))
    c.expect_rejected([], INVALID, [c.input, "damaged HDF5 file", "hint:"])


def h5py_file_cut_in_half(c):
    c.embeddings(n=64, length=16, d=16)
    data = open(c.input, "rb").read()
    with open(c.input, "wb") as f:
        f.write(data[: len(data) // 2])
    c.expect_rejected([], INVALID, [c.input, "damaged HDF5 file"])


def qkv_with_no_sequences(c):
    with h5py.File(c.input, "w") as f:
        for name in ("query", "key", "value"):
            f[name] = np.zeros((0, 8, 8), np.float32)
    c.expect_rejected(["--query", "/query", "--key", "/key", "--value", "/value"], INVALID, [c.input, "/query", "N = 0"])


def dtype_case(dtype_writer, fragments, dataset="embeddings", option_args=()):
    def case(c):
        with h5py.File(c.input, "w") as f:
            dtype_writer(f)
        c.expect_rejected(list(option_args), INVALID, [c.input, "/" + dataset] + fragments)
    return case


def _int8(f):
    f["embeddings"] = np.arange(4 * 8 * 8, dtype=np.int64).reshape(4, 8, 8).astype(np.int8)


def _complex(f):
    f["embeddings"] = (np.ones((4, 8, 8)) + 1j).astype(np.complex64)


def _structured(f):
    f["embeddings"] = np.zeros((4, 8, 8), dtype=[("x", "<f4"), ("y", "<i4"), ("z", "<f4")])


def _bool(f):
    f["embeddings"] = np.zeros((4, 8, 8), bool)


def _vlen(f):
    f.create_dataset("embeddings", (4, 8, 8), dtype=h5py.vlen_dtype(np.float32))


def _bytes(f):
    f["embeddings"] = np.full((4, 8, 8), b"0.5", dtype="S4")


def _e6m9_key(f):
    """A 2-byte float that is neither float16 nor bfloat16 (those are read)."""
    f["query"] = np.zeros((4, 8, 8), np.float32)
    layout = h5py.h5t.IEEE_F32LE.copy()
    layout.set_fields(15, 9, 6, 0, 9)
    layout.set_size(2)
    layout.set_ebias(31)
    h5py.h5d.create(f.id, b"key", layout, h5py.h5s.create_simple((4, 8, 8)))
    f["value"] = np.zeros((4, 8, 8), np.float32)


QKV = ("--query", "/query", "--key", "/key", "--value", "/value")


def lengths_case(values, fragments):
    def case(c):
        c.embeddings(lengths=values)
        c.expect_rejected([], INVALID, [c.input, "/lengths"] + fragments)
    return case


def qkv_lengths_wrong_count(c):
    with h5py.File(c.input, "w") as f:
        for name in ("query", "key", "value"):
            f[name] = np.zeros((4, 8, 8), np.float32)
        f["lengths"] = np.array([8, 8, 8], np.int32)
    c.expect_rejected(list(QKV), INVALID, [c.input, "/lengths", "[3]", "[N] = [4]"])


def qkv_value_fewer_tokens(c):
    with h5py.File(c.input, "w") as f:
        f["query"] = np.zeros((4, 8, 8), np.float32)
        f["key"] = np.zeros((4, 8, 8), np.float32)
        f["value"] = np.zeros((4, 7, 8), np.float32)
    c.expect_rejected(list(QKV), INVALID, [c.input, "/value", "L = 7", "/key", "L = 8"])


def weights_case(writer, fragments):
    def case(c):
        c.embeddings()
        weights = c.path("w.h5")
        rng = np.random.default_rng(2)
        with h5py.File(weights, "w") as f:
            writer(f, rng)
        c.guarded.append(weights)
        c.expect_rejected(["--weights", weights], INVALID, [weights] + fragments)
    return case


def _w_float16(f, rng):
    for name in ("w_q", "w_k", "w_v"):
        f[name] = rng.standard_normal((8, 8)).astype(np.float16)


def _w_rank3(f, rng):
    for name in ("w_q", "w_k", "w_v"):
        f[name] = rng.standard_normal((8, 8, 1)).astype(np.float32)


def _w_v_rows(f, rng):
    f["w_q"] = rng.standard_normal((8, 8)).astype(np.float32)
    f["w_k"] = rng.standard_normal((8, 8)).astype(np.float32)
    f["w_v"] = rng.standard_normal((6, 8)).astype(np.float32)


def _w_inf_bias(f, rng):
    for name in ("w_q", "w_k", "w_v"):
        f[name] = rng.standard_normal((8, 8)).astype(np.float32)
    b = np.zeros(8, np.float32)
    b[5] = np.inf
    f["b_k"] = b


def _w_o_columns_but_bias(f, rng):
    for name in ("w_q", "w_k", "w_v"):
        f[name] = rng.standard_normal((8, 8)).astype(np.float32)
    f["w_o"] = rng.standard_normal((8, 4)).astype(np.float32)
    f["b_o"] = np.zeros(6, np.float32)


def nan_in_float64_key(c):
    with h5py.File(c.input, "w") as f:
        f["query"] = np.zeros((4, 8, 8), np.float64)
        k = np.zeros((4, 8, 8), np.float64)
        k[1, 6, 2] = np.nan
        f["key"] = k
        f["value"] = np.zeros((4, 8, 8), np.float64)
    c.expect_rejected(list(QKV), INVALID, [c.input, "/key", "nan", "[1, 6, 2]", "finite"])


def inf_in_value(c):
    with h5py.File(c.input, "w") as f:
        f["query"] = np.zeros((4, 8, 8), np.float32)
        f["key"] = np.zeros((4, 8, 8), np.float32)
        v = np.zeros((4, 8, 8), np.float32)
        v[3, 0, 7] = np.inf
        f["value"] = v
    c.expect_rejected(list(QKV), INVALID, [c.input, "/value", "inf", "[3, 0, 7]"])


def config_case(text, fragments):
    def case(c):
        c.embeddings()
        config = c.path("job.ini")
        with open(config, "w") as f:
            f.write(text)
        c.guarded.append(config)
        c.expect_rejected(["--config", config], USAGE, fragments)
    return case


def env_case(variable, value, fragments):
    def case(c):
        c.embeddings()
        c.expect_rejected([], USAGE, fragments, env={variable: value})
    return case


CASES = {
    "disk_full_precheck": disk_full_precheck,
    "disk_full_while_writing": disk_full_while_writing,
    "disk_full_at_final_flush": disk_full_at_final_flush,
    "file_size_limit_while_writing": file_size_limit_while_writing,
    "file_size_limit_at_final_flush": file_size_limit_at_final_flush,
    "output_dir_read_only_mount": output_dir_read_only_mount,
    "output_dir_not_writable_unprivileged": output_dir_not_writable_unprivileged,
    "input_not_readable_unprivileged": input_not_readable_unprivileged,
    "output_exists_is_kept": output_exists_is_kept,
    "force_with_bad_input_keeps_earlier_output": force_with_bad_input_keeps_earlier_output,
    "input_held_open_for_writing": input_held_open_for_writing,
    "weights_held_open_for_writing": weights_held_open_for_writing,
    "partial_held_open_by_another_run": partial_held_open_by_another_run,
    "partial_held_open_with_force": partial_held_open_with_force,
    "file_locking_unavailable": file_locking_unavailable,
    "file_locking_unavailable_cured_by_the_hint": file_locking_unavailable_cured_by_the_hint,
    "input_is_a_fifo": input_is_a_fifo,
    "input_is_a_device": input_is_a_device,
    "input_symlink_loop": input_symlink_loop,
    "signature_then_garbage": signature_then_garbage,
    "h5py_file_cut_in_half": h5py_file_cut_in_half,
    "qkv_with_no_sequences": qkv_with_no_sequences,
    "int8_embeddings": dtype_case(_int8, ["int8", "expected float32 or float64"]),
    "complex_embeddings": dtype_case(_complex, ["compound", "complex numbers", "expected float32 or float64"]),
    "structured_embeddings": dtype_case(_structured, ["compound of 3 fields", "expected float32 or float64"]),
    "bool_embeddings": dtype_case(_bool, ["enum", "booleans", "expected float32 or float64"]),
    "vlen_embeddings": dtype_case(_vlen, ["variable-length", "expected float32 or float64"]),
    "byte_string_embeddings": dtype_case(_bytes, ["string", "expected float32 or float64"]),
    "e6m9_float_key": dtype_case(_e6m9_key, ["float16(e6m9)", "expected float32 or float64", "astype"], "key", QKV),
    "lengths_uint64_huge": lengths_case(np.array([8, 8, 2 ** 63, 8], np.uint64), ["/lengths[2]", "exceeds L = 8"]),
    "lengths_int64_very_negative": lengths_case(np.array([8, -2 ** 40, 8, 8], np.int64), ["/lengths[1]", "negative"]),
    "lengths_bool": lengths_case(np.array([True] * 4), ["enum", "expected an integer type"]),
    "lengths_int8_beyond_l": lengths_case(np.array([8, 8, 8, 100], np.int8), ["/lengths[3] = 100", "exceeds L = 8"]),
    "qkv_lengths_wrong_count": qkv_lengths_wrong_count,
    "qkv_value_fewer_tokens": qkv_value_fewer_tokens,
    "weights_float16": weights_case(_w_float16, ["/w_q", "float16", "expected float32 or float64"]),
    "weights_rank3": weights_case(_w_rank3, ["/w_q", "[8, 8, 1]", "rank 3", "expected [d, H*d_k]"]),
    "weights_w_v_rows": weights_case(_w_v_rows, ["/w_v", "[6, 8]"]),
    "weights_inf_bias": weights_case(_w_inf_bias, ["/b_k", "inf", "[5]"]),
    "weights_b_o_size": weights_case(_w_o_columns_but_bias, ["/b_o", "[6]", "[4]"]),
    "nan_in_float64_key": nan_in_float64_key,
    "inf_in_value": inf_in_value,
    "config_unknown_key_typo": config_case("[run]\nhead = 2\n", ["job.ini", "unrecognised option 'head'"]),
    "config_scale_overflows": config_case("[run]\nscale = 1e999\n", ["job.ini", "'1e999'", "scale"]),
    "config_heads_fraction": config_case("[run]\nheads = 2.5\n", ["job.ini", "'2.5'", "heads"]),
    "config_block_q_negative": config_case("[run]\nblock-q = -5\n", ["--block-q", "expected auto or a positive"]),
    "config_unit_sequences_too_big": config_case("[run]\nunit-sequences = 99999999999999999999\n",
                                                 ["job.ini", "99999999999999999999", "unit-sequences"]),
    "env_heads_not_a_number": env_case("ATTNBATCH_HEADS", "two", ["ATTNBATCH_HEADS=two", "'two'", "heads",
                                                                   "hint: fix or unset ATTNBATCH_HEADS"]),
    "env_scale_not_a_number": env_case("ATTNBATCH_SCALE", "big", ["ATTNBATCH_SCALE=big", "'big'", "scale"]),
    "env_save_weights_bad": env_case("ATTNBATCH_SAVE_WEIGHTS", "some", ["--save-weights", "'some'", "none|all|mean"]),
    "env_max_memory_bad": env_case("ATTNBATCH_MAX_MEMORY", "lots", ["--max-memory", "'lots'", "positive size"]),
    "env_config_missing": env_case("ATTNBATCH_CONFIG", "/nonexistent/job.ini", ["--config", "/nonexistent/job.ini",
                                                                                 "readable INI file"]),
}


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    binary, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    names = sys.argv[3:] or list(CASES)
    os.makedirs(root, exist_ok=True)
    os.chmod(root, 0o755)
    # nobody must reach the case directories for the setpriv cases
    for parent in [root] + [os.path.dirname(root)]:
        try:
            os.chmod(parent, os.stat(parent).st_mode | 0o011)
        except OSError:
            pass
    start = time.monotonic()
    for name in names:
        case = Case(binary, root, name)
        try:
            CASES[name](case)
            passes.append(name)
            print("PASS  %s%s" % (name, "".join("\n      note: " + n for n in case.notes)), flush=True)
            print("      " + getattr(case, "message", "(no error line)")[:400], flush=True)
        except (CaseFailure, AssertionError, OSError, subprocess.SubprocessError) as failure:
            failures.append(name)
            print("FAIL  %s: %s" % (name, failure), flush=True)
        finally:
            case.cleanup()
    print("%d passed, %d failed in %.1f s" % (len(passes), len(failures), time.monotonic() - start))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
