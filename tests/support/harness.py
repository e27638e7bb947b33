"""What the Python test scripts share: checks that record a failure and go on (a run reports
every broken promise, not the first), file digests, runs under a timeout, and mpirun command
lines for this machine.

A script imports it from its own location:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
    from harness import check, failures
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

failures = []


def check(condition, message):
    """Records `message` as a failure (and prints it at once) unless `condition` holds."""
    if not condition:
        failures.append(message)
        print("FAIL: " + message, flush=True)
    return condition


def exit_status():
    """A test script's exit status: 1 after saying how many checks failed, else 0."""
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


SKIPPED = 77  # the exit status ctest reads as skipped (SKIP_RETURN_CODE 77 in the CMakeLists)


def skip(reason):
    """Ends a test that needs a feature this machine lacks: ctest reports it skipped, with the
    reason, instead of a pass that checked nothing. Checks that failed before still fail it."""
    if failures:
        sys.exit(exit_status())
    print("skipped: " + reason, flush=True)
    sys.exit(SKIPPED)


def join_or_kill(process, reader, timeout):
    """Waits up to `timeout` seconds for `reader`, the thread collecting `process`'s output;
    kills the process if it is still running then. False when it had to (a hang)."""
    reader.join(timeout)
    if not reader.is_alive():
        return True
    process.kill()
    reader.join()
    return False


def digest(path):
    """sha256 of the file's bytes."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_same_results(reference, candidate, label, reference_name):
    """The candidate output is complete and holds the reference output's results byte for byte
    (/output, /attention, /lse, /lengths, /offsets, those the reference has)."""
    import h5py
    import numpy as np
    with h5py.File(reference, "r") as ref, h5py.File(candidate, "r") as out:
        check(int(out.attrs["complete"]) == 1, "%s: complete is not 1" % label)
        for name in ("output", "attention", "lse", "lengths", "offsets"):
            if name not in ref:
                check(name not in out, "%s: /%s present, absent from %s" % (label, name, reference_name))
                continue
            a, b = ref[name][()], out[name][()]
            same = a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
            differing = int(np.count_nonzero(a.view(np.uint8) != b.view(np.uint8))) if a.shape == b.shape else -1
            check(same, "%s: /%s differs from %s (%d bytes differ; %s%s vs %s%s)"
                  % (label, name, reference_name, differing, b.dtype, b.shape, a.dtype, a.shape))


def fresh_directory(path):
    """An empty directory at `path`, whatever was there."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)


def run_with_timeout(command, timeout, **kwargs):
    """subprocess.run with stdout and stderr captured as text; None when the command has not
    exited after `timeout` seconds (it is killed)."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired:
        return None


def reference_sequences(binary, seconds, ranks):
    """How many sequences of the long jobs' shape (generate --seq-len 256 --dim 64 --heads 4:
    four heads of 16) the fp64 reference kernel gets through in about `seconds` on `ranks`
    ranks, timed here and now, in whole units of 4 per rank. A test that signals a run or
    cuts a node mid-run needs the run still going then, which is a time, not a count: this
    project's machines have differed eightfold in the reference kernel's rate (a Zen 5 did
    80-100 sequences a second per core, a Xeon does 12), and a busy suite halves it again."""
    timed = subprocess.run([str(binary), "bench", "--kernel", "reference", "--batch", "2", "--heads", "4", "--seq-len", "256",
                            "--head-dim", "16", "--threads", "1", "--repeats", "3", "--json"],
                           capture_output=True, text=True, check=True)
    per_sequence = json.loads(timed.stdout)["median_seconds"] / 2
    unit = 4 * int(ranks)
    return max(2 * unit, round(float(seconds) * int(ranks) / per_sequence / unit) * unit)


def mpi_env(**extra):
    """The environment with what Open MPI needs here: running as root (the test machines do)
    and more ranks than cores."""
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OMPI_MCA_rmaps_base_oversubscribe="1", **extra)


def mpirun(mpiexec, ranks, command, options=()):
    """`command` on `ranks` ranks: oversubscribed and unbound, as the ranks outnumber the
    cores; `options` go to mpiexec."""
    return [mpiexec, "-np", str(ranks), "--oversubscribe", "--bind-to", "none", *options, *command]


def rank_pids(binary, directory):
    """The processes running `binary` with `directory` as their working directory (the ranks of
    a job started there, not mpirun)."""
    # A rank that is exiting loses its /proc/PID/exe first (with its memory, which takes a
    # while for a sanitizer build's large mappings) and closes its files, releasing the HDF5
    # file lock, only later: its name and working directory last until then.
    name = os.path.basename(binary)[:15]
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink("/proc/%s/cwd" % entry) != directory:
                continue
            try:
                running = os.readlink("/proc/%s/exe" % entry) == binary
            except OSError:
                with open("/proc/%s/comm" % entry) as comm:
                    running = comm.read().strip() == name
            if running:
                pids.append(int(entry))
        except OSError:
            pass
    return pids


def catches(pid, signal_number):
    """Whether process `pid` has a handler for `signal_number` (SigCgt in /proc/PID/status):
    for attnbatch run, whether it has started (the dynamic loader is done and its stop
    handlers exist). False once the process is gone."""
    try:
        with open("/proc/%d/status" % pid) as status:
            for line in status:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signal_number - 1) & 1)
    except OSError:
        pass
    return False


def wait_until_gone(binary, directory, timeout=30.0):
    """Waits until no process runs `binary` in `directory`: mpirun may exit while a rank it
    killed is still going (and holding its files); a scheduler cleans up a job's step before
    a requeue, and a test reads the files only then. True when they are gone."""
    deadline = time.monotonic() + timeout
    while rank_pids(binary, directory):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
