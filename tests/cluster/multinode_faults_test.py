#!/usr/bin/python3
"""Faults of a multi-node run on the rig, each ending within a bounded time with nothing lost:

  node lost   every process of node3 (its orted, its rank, its slurmd) is SIGKILLed mid-run:
              mpirun ends within NODE_LOST_LIMIT s with a non-zero code (Open MPI's own: 205
              or 9 were seen), no OUTPUT appears, OUTPUT.partial stays, and --resume on the two
              surviving nodes (fewer ranks) ends byte-identical to an uninterrupted run
  link cut    node3's link goes down mid-run: mpirun ends within LINK_CUT_LIMIT s (the rig's
              Open MPI keepalives: 5 s idle + 3 probes 2 s apart), the ranks on the cut node
              end too, no OUTPUT; with the link back, --resume (now 2 ranks on each of 3 nodes)
              ends byte-identical
  slow link   node2's link throttled to 40 Mbit/s both ways (tc tbf; this kernel has no netem,
              so no delay or loss), --io gather so that node2's results cross it: identical
              bytes, and the qdisc shows it held packets back (overlimits > 0)

usage: multinode_faults_test.py ATTNBATCH MPIEXEC WORKDIR

The exit codes and times are printed as a table at the end. The rig is left as it was found
(node3 revived, links up and unthrottled), whatever fails. Skipped (77) where the rig cannot
run.
"""
import os
import re
import subprocess
import sys
import threading
import time

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rig  # noqa: E402
from harness import check, exit_status, rank_pids, reference_sequences, run_with_timeout, wait_until_gone  # noqa: E402

TIMEOUT = 180
NODE_LOST_LIMIT = 15.0   # seconds from the kill to mpirun's end; 2-3 s measured
LINK_CUT_LIMIT = 30.0    # seconds from the cut to mpirun's end; 11-12 s measured
GONE_LIMIT = 20.0        # seconds after mpirun's end until no rank of the job runs anywhere
# The reference kernel (fp64) keeps the run a few seconds long on 3 ranks: time to strike.
OPTIONS = ["--heads", "4", "--kernel", "reference", "--save-weights", "none", "--unit-sequences", "4", "--threads", "1",
           "--io", "gather", "--progress", "auto", "--progress-interval", "0.3"]
results = []  # (case, exit code, seconds from the fault to the end)


def same_data(reference, candidate, label):
    if not check(os.path.exists(candidate), "%s: %s missing" % (label, candidate)):
        return
    with h5py.File(reference, "r") as a, h5py.File(candidate, "r") as b:
        check(int(b.attrs["complete"]) == 1, "%s: complete is not 1" % label)
        for name in ("output", "lse", "lengths"):
            check(a[name][()].tobytes() == b[name][()].tobytes(), "%s: /%s differs from the uninterrupted run" % (label, name))


class Run:
    """attnbatch run under mpirun in the background, its output collected as it comes."""

    def __init__(self, command, env, cwd):
        self.lines = []
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                        cwd=cwd)
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.process.stdout))
        self.reader.start()

    def progressed(self, percent, timeout=60.0):
        """Waits until the progress line reaches `percent`; False if the run ended or time ran out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            for line in list(self.lines):
                m = re.match(r"progress:\s+([0-9.]+)%", line)
                if m and float(m.group(1)) >= percent:
                    return True
            time.sleep(0.05)
        return False

    def end(self, timeout):
        """(exit code or None when still running after `timeout` s, seconds waited)."""
        t0 = time.monotonic()
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = None
        self.reader.join()
        return code, time.monotonic() - t0

    def text(self):
        return "".join(self.lines)


def strike(case, run, fault, limit, binary, work):
    """Applies `fault` once the run is a fifth done; checks its end within `limit` seconds."""
    if not check(run.progressed(20.0), "%s: the run never got a fifth done:\n%s" % (case, run.text()[-1500:])):
        run.end(TIMEOUT)
        return None
    fault()
    code, seconds = run.end(TIMEOUT)
    results.append((case, code, "%.1f" % seconds))
    check(code is not None, "%s: mpirun still running %d s after the fault" % (case, TIMEOUT))
    check(code not in (None, 0), "%s: mpirun exited 0 although a node was lost" % case)
    check(seconds <= limit, "%s: mpirun ended %.1f s after the fault, more than the documented %.0f s" % (case, seconds, limit))
    check(wait_until_gone(binary, work, GONE_LIMIT), "%s: ranks still running %.0f s after mpirun ended: %s"
          % (case, GONE_LIMIT, rank_pids(binary, work)))
    return code


def main():
    binary, mpiexec, work = rig.arguments(__doc__)
    env = rig.env(SOURCE_DATE_EPOCH="1767225600")
    hosts = {k: rig.hostfile(os.path.join(work, "hosts-%d-%d" % k), *k) for k in ((3, 1), (2, 1), (3, 2))}
    data, small = os.path.join(work, "in.h5"), os.path.join(work, "small.h5")
    # About 6 s of the reference kernel for the struck runs, on the host's 2 cores; the slow
    # link's run is small and fixed: its time is the link's.
    for path, n in ((data, str(reference_sequences(binary, 6, 2))), (small, "96")):
        made = run_with_timeout([binary, "generate", "--output", path, "--num-seqs", n, "--seq-len", "256", "--dim", "64",
                                 "--heads", "4", "--seed", "9"], TIMEOUT, env=env)
        if not check(made is not None and made.returncode == 0, "generate %s: %s" % (path, made.stderr if made else "timeout")):
            return exit_status()

    def launch(nodes, per_node, data_path, output, extra=()):
        return rig.mpirun(mpiexec, hosts[(nodes, per_node)], nodes, per_node,
                          [binary, "run", "--input", data_path, "--output", output] + OPTIONS + list(extra))

    reference = os.path.join(work, "reference.h5")
    done = run_with_timeout(launch(3, 1, data, reference), TIMEOUT, env=env, cwd=work)
    if not check(done is not None and done.returncode == 0, "uninterrupted run: %s" % (done.stderr if done else "timeout")):
        return exit_status()
    try:
        # 1. A node lost: SIGKILL to every process in node3's namespace.
        lost = os.path.join(work, "lost.h5")
        run = Run(launch(3, 1, data, lost), env, work)
        strike("node lost (node3 killed)", run, lambda: rig.command("kill-node", "node3"), NODE_LOST_LIMIT, binary, work)
        check(not os.path.exists(lost) and os.path.exists(lost + ".partial"),
              "node lost: expected %s.partial and no %s" % (lost, lost))
        resumed = run_with_timeout(launch(2, 1, data, lost, ["--resume"]), TIMEOUT, env=env, cwd=work)
        check(resumed is not None and resumed.returncode == 0,
              "node lost: --resume on node1 and node2: %s" % (resumed.stderr[-800:] if resumed else "timeout"))
        same_data(reference, lost, "node lost, resumed on 2 nodes")
        code, text = rig.command("revive", "node3")
        check(code == 0, "revive node3: " + text)

        # 2. A link cut: node3's veth down.
        cut = os.path.join(work, "cut.h5")
        run = Run(launch(3, 1, data, cut), env, work)
        strike("link cut (node3)", run, lambda: rig.command("link", "node3", "down"), LINK_CUT_LIMIT, binary, work)
        check(not os.path.exists(cut) and os.path.exists(cut + ".partial"), "link cut: expected %s.partial and no %s" % (cut, cut))
        rig.command("link", "node3", "up")
        resumed = run_with_timeout(launch(3, 2, data, cut, ["--resume"]), TIMEOUT, env=env, cwd=work)
        check(resumed is not None and resumed.returncode == 0,
              "link cut: --resume on 3 nodes x 2 ranks: %s" % (resumed.stderr[-800:] if resumed else "timeout"))
        same_data(reference, cut, "link cut, resumed on 3 nodes x 2 ranks")

        # 3. A slow link: node2 at 40 Mbit/s both ways.
        small_reference, slow = os.path.join(work, "small-reference.h5"), os.path.join(work, "slow.h5")
        done = run_with_timeout(launch(3, 1, small, small_reference), TIMEOUT, env=env, cwd=work)
        check(done is not None and done.returncode == 0, "small uninterrupted run: %s" % (done.stderr if done else "timeout"))
        code, text = rig.command("link", "node2", "rate", "40mbit")
        check(code == 0, "link node2 rate 40mbit: " + text)
        t0 = time.monotonic()
        done = run_with_timeout(launch(3, 1, small, slow), TIMEOUT, env=env, cwd=work)
        results.append(("slow link (node2, 40 Mbit/s)", done.returncode if done else None, "%.1f" % (time.monotonic() - t0)))
        check(done is not None and done.returncode == 0, "slow link: %s" % (done.stderr if done else "timeout"))
        same_data(small_reference, slow, "slow link")
        code, text = rig.command("link", "node2", "show")
        print(text)
        overlimits = [int(n) for n in re.findall(r"overlimits (\d+)", text)]
        check(sum(overlimits) > 0, "slow link: the tbf qdiscs never held a packet back (overlimits %s)" % overlimits)
    finally:
        rig.command("link", "node2", "unlimited")
        rig.command("link", "node3", "up")
        if "slurmd node3: not running" in rig.command("status")[1]:
            rig.command("revive", "node3")

    print("\n%-32s %9s %s" % ("fault", "exit code", "seconds from the fault to mpirun's end (slow link: the run)"))
    for row in results:
        print("%-32s %9s %s" % row)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
