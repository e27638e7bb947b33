#!/usr/bin/python3
"""A process started without mpirun (an Open MPI singleton) keeps its session files in a
directory of its own, and removes it at the end.

usage: singleton_session_test.py ATTNBATCH WORKDIR

Every isolated singleton would name its session directory <TMPDIR>/ompi.<host>.<uid>/jf.0/1/0:
two started at once raced (one removing jf.0 as it ended while the other created jf.0/1), and
the loser's MPI_Init failed. The race is rare; its outcome is made certain here: jf.0 is taken
by a plain file in a TMPDIR of the test's own, so a run that used the shared path could not
start. The runs (a plain one and one with --io parallel, whose MPI-IO wants session files)
must succeed and leave TMPDIR as they found it.

A singleton killed by SIGKILL cannot remove its directory; the next singleton started with
the same TMPDIR removes it, and only such directories: those named for this PID namespace
whose process is gone. Checked with a run killed while it computes, and with planted
directories: one of a process that has ended (removed), one of this live test process and one
of another PID namespace (both kept).
"""
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, exit_status, fresh_directory, run_with_timeout  # noqa: E402

TIMEOUT = 120


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    binary, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    fresh_directory(root)
    tmp = os.path.join(root, "tmp")
    shared = os.path.join(tmp, "ompi.%s.%d" % (socket.gethostname(), os.getuid()))
    os.makedirs(shared)
    with open(os.path.join(shared, "jf.0"), "w") as f:
        f.write("not a directory: a singleton using the shared session path cannot start\n")
    before = sorted(os.listdir(tmp))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "ATTNBATCH_", "SLURM_"))}
    env.update(TMPDIR=tmp, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    data = os.path.join(root, "in.h5")
    done = run_with_timeout([binary, "generate", "--output", data, "--num-seqs", "4", "--seq-len", "8", "--dim", "8"],
                            TIMEOUT, env=env)
    check(done is not None and done.returncode == 0, "generate failed: %s" % (done.stderr if done else "timeout"))
    for io in ("gather", "parallel"):
        out = os.path.join(root, "out_%s.h5" % io)
        done = run_with_timeout([binary, "run", "--input", data, "--output", out, "--io", io, "--progress", "never"],
                                TIMEOUT, env=env)
        if not check(done is not None, "run --io %s: no exit within %d s" % (io, TIMEOUT)):
            continue
        check(done.returncode == 0, "run --io %s: exit %d: %s" % (io, done.returncode, done.stderr.strip()[:600]))
        check("error" not in done.stderr.lower(), "run --io %s printed an error: %s" % (io, done.stderr.strip()[:600]))
        check(os.path.exists(out), "run --io %s wrote no output" % io)
        check(sorted(os.listdir(tmp)) == before, "run --io %s left %s in TMPDIR" % (io, sorted(os.listdir(tmp))))

    # Killed while it computes (every step long), its directory stays behind.
    big = os.path.join(root, "big.h5")
    done = run_with_timeout([binary, "generate", "--output", big, "--num-seqs", "256", "--seq-len", "1024", "--dim", "64"],
                            TIMEOUT, env=env)
    check(done is not None and done.returncode == 0, "generate big failed: %s" % (done.stderr if done else "timeout"))
    victim = subprocess.Popen([binary, "run", "--input", big, "--output", os.path.join(root, "killed.h5"), "--threads", "1",
                               "--save-weights", "none", "--progress", "never"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    left = []
    deadline = time.time() + 60
    while not left and time.time() < deadline and victim.poll() is None:
        left = [n for n in os.listdir(tmp) if n.startswith("attnbatch-mpi-") and "-%d-" % victim.pid in n]
        time.sleep(0.01)
    time.sleep(0.2)  # into MPI_Init and beyond, its session files made
    check(victim.poll() is None, "the run to be killed ended first (exit %s): make its input larger" % victim.returncode)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    check(len(left) == 1 and os.path.isdir(os.path.join(tmp, left[0])),
          "the killed run's private directory was not seen: %s" % sorted(os.listdir(tmp)))

    # Planted: a directory of a process that has ended, one of this live process, one of
    # another PID namespace (named like ours, the namespace's number changed).
    ended = subprocess.Popen(["true"])
    ended.wait()
    namespace = os.readlink("/proc/self/ns/pid").split("[")[1].rstrip("]")
    stale = "attnbatch-mpi-%s-%d-ended0" % (namespace, ended.pid)
    alive = "attnbatch-mpi-%s-%d-alive0" % (namespace, os.getpid())
    foreign = "attnbatch-mpi-%d-%d-other0" % (int(namespace) + 1, ended.pid)
    for name in (stale, alive, foreign):
        os.makedirs(os.path.join(tmp, name, "jf.0"))
    out = os.path.join(root, "after_kill.h5")
    done = run_with_timeout([binary, "run", "--input", data, "--output", out, "--progress", "never"], TIMEOUT, env=env)
    check(done is not None and done.returncode == 0, "the run after the kill failed: %s" % (done.stderr if done else "timeout"))
    now = sorted(os.listdir(tmp))
    for name in left + [stale]:
        check(name not in now, "%s (its process gone) was not removed: %s" % (name, now))
    for name in (alive, foreign):
        check(name in now, "%s was removed, though its process is alive or not of this namespace" % name)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
