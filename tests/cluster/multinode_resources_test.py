#!/usr/bin/python3
"""Node-aware resources across the rig's nodes: the dry run and the real run's header list
every node with its ranks and its memory budget (a quarter of the node's own memory, its
cgroup limit where the rig set one, else MemTotal, shared by that node's ranks only), the
default --max-memory is the smallest per-rank share any node gives, both say the same, and a
--max-memory that a node's ranks cannot have together is warned about, naming the node.

usage: multinode_resources_test.py ATTNBATCH MPIEXEC WORKDIR

Ranks are placed unevenly, 2 on node1 and 1 each on node2 and node3, so that the ranks per
node and (where the rig's nodes have memory cgroups of 3, 2, 3 GiB) the memories differ.
Skipped (77) where the rig cannot run.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rig  # noqa: E402
from harness import check, exit_status, run_with_timeout  # noqa: E402

TIMEOUT = 120
PLACEMENT = {"node1": 2, "node2": 1, "node3": 1}


def format_bytes(value):
    """attnbatch's format_bytes: 1024-based, one decimal from KiB on."""
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    unit = 0
    while value >= 1024 and unit < 5:
        value /= 1024.0
        unit += 1
    return "%.0f %s" % (value, units[unit]) if unit == 0 else "%.1f %s" % (value, units[unit])


def own_memory(binary, data, work, env):
    """(bytes, source) of this host as attnbatch sees it outside the rig's cgroups: MemTotal,
    or the limit of the cgroup this test runs in (a container's). A rig node's own limit
    counts where it is lower."""
    report = os.path.join(work, "own.json")
    result = run_with_timeout([binary, "run", "--input", data, "--heads", "2", "--output", os.path.join(work, "own.h5"),
                               "--report", report], TIMEOUT, env=env)
    if result is None or result.returncode != 0:
        raise RuntimeError("one-process run: %s" % (result.stderr if result else "timed out"))
    with open(report) as f:
        r = json.load(f)
    return r["node_memory_bytes"][0], r["node_memory_source"][0]


def node_lines(stdout):
    return [line.strip() for line in stdout.splitlines() if re.match(r"\s+node\d+: ", line)]


def main():
    binary, mpiexec, work = rig.arguments(__doc__)
    env = rig.env()
    nodes = rig.info()
    hosts = os.path.join(work, "hosts")
    with open(hosts, "w") as f:
        f.writelines("%s slots=%d\n" % (n, k) for n, k in PLACEMENT.items())
    data = os.path.join(work, "in.h5")
    made = run_with_timeout([binary, "generate", "--output", data, "--num-seqs", "24", "--seq-len", "32", "--dim", "16",
                             "--heads", "2", "--seed", "4"], TIMEOUT, env=env)
    check(made is not None and made.returncode == 0, "generate: %s" % (made.stderr if made else "timeout"))

    # What each node must say, from what the rig gave it.
    own = own_memory(binary, data, work, env)
    memory_of = {name: (limit, "cgroup") if limit is not None and limit < own[0] else own
                 for name, (_, limit) in nodes.items()}
    expected, shares = [], []
    for name, ranks in PLACEMENT.items():
        memory, source = memory_of[name]
        share = memory // 4 // ranks
        shares.append(share)
        expected.append("%s: %d rank%s, memory %s (%s): budget %s, %s per rank" % (
            name, ranks, "" if ranks == 1 else "s", format_bytes(memory), source, format_bytes(memory / 4),
            format_bytes(share)))
    print("the rig's nodes: %s; outside them attnbatch sees %d bytes (%s)" % (nodes, own[0], own[1]))
    ranks = sum(PLACEMENT.values())
    launch = [mpiexec, "--hostfile", hosts, "-np", str(ranks), "--bind-to", "none", binary, "run", "--input", data,
              "--heads", "2", "--threads", "1"]

    runs = {}
    for kind, extra in (("dry run", ["--dry-run", "--output", os.path.join(work, "dry.h5")]),
                        ("run", ["--output", os.path.join(work, "out.h5")])):
        result = run_with_timeout(launch + extra, TIMEOUT, env=env)
        if not check(result is not None and result.returncode == 0,
                     "%s: %s" % (kind, (result.stderr if result else "timed out")[-600:])):
            return exit_status()
        runs[kind] = result.stdout
        print("----- %s header\n%s" % (kind, "\n".join(result.stdout.splitlines()[:8])))
        check(node_lines(result.stdout) == expected,
              "%s: node lines %s, expected %s" % (kind, node_lines(result.stdout), expected))
        check("3 nodes, ranks per node 1-2; messaging ob1 over tcp + vader (chosen by Open MPI" in result.stdout,
              "%s: no line '3 nodes, ranks per node 1-2; messaging ob1 over tcp + vader (chosen by Open MPI...'" % kind)
        check("under --max-memory %s per rank" % format_bytes(min(shares)) in result.stdout,
              "%s: the default --max-memory is not the smallest share, %s" % (kind, format_bytes(min(shares))))
    check(node_lines(runs["dry run"]) == node_lines(runs["run"]), "the dry run and the run list the nodes differently")

    # More than a node can give its ranks: 2 ranks x 60% of node1's memory.
    too_much = memory_of["node1"][0] * 6 // 10 // (1 << 20)
    result = run_with_timeout(launch + ["--dry-run", "--output", os.path.join(work, "dry.h5"), "--max-memory",
                                        "%dM" % too_much], TIMEOUT, env=env)
    check(result is not None and result.returncode == 0 and
          re.search(r"warning: node1: 2 rank\(s\) x --max-memory [0-9.]+ [KMGT]iB = [0-9.]+ [KMGT]iB, more than its", result.stderr),
          "--max-memory %dM on node1's 2 ranks: no warning naming node1: %s" % (too_much, result.stderr if result else "timeout"))
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
