#!/usr/bin/python3
"""Across nodes, the same bytes as one process: /output, /lse, /attention and /lengths of runs
on 2, 3 and 4 nodes of the rig x 1 and 2 ranks per node, over TCP, are byte-identical to a
plain one-process run (docs/formats.md, Guarantees), and each run's --report says where it ran.

usage: multinode_identity_test.py ATTNBATCH MPIEXEC WORKDIR

Inputs (small, so that many combinations fit one test):
  padded   ragged lengths including 0, causal, every map stored, several units per rank
  packed   the packed layout from a Pareto tail: its longest sequences are cut into pieces of
           query rows that land on different nodes (checked in the printed plan), head-mean
           maps as f16
  gqa      projections from a weights file with grouped-query attention (H = 8 query heads on
           G = 2 K/V heads), rotary embeddings, causal, every map stored
Each input runs on four of the six layouts (nodes x ranks per node), each layout on two
inputs, the io mode and schedule rotating so that each input meets all four (io
parallel|gather x schedule static|dynamic) and a layout's two runs differ in both: 12 runs,
the table printed at the end.

Each run's report must say: as many nodes as asked, that many ranks on each, and the
messaging layer Open MPI chose itself (not attnbatch's one-node ob1 default) over tcp, plus
shared memory (vader) exactly when a node has two ranks. One more run with two ranks on one
node must name the one-node default. Skipped (77) where the rig cannot run.
"""
import json
import os
import sys
import time


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rig  # noqa: E402
from harness import check, check_same_results, exit_status, run_with_timeout  # noqa: E402

REFERENCE = "the one-process run"

TIMEOUT = 120
LAYOUTS = [(nodes, per_node) for nodes in (2, 3, 4) for per_node in (1, 2)]
PAR, GA, ST, DYN = "parallel", "gather", "static", "dynamic"
# input: [((nodes, ranks per node), (io, schedule))]
PLAN = {"padded": [((2, 1), (PAR, ST)), ((2, 2), (PAR, DYN)), ((3, 2), (GA, ST)), ((4, 1), (GA, DYN))],
        "packed": [((2, 2), (GA, ST)), ((3, 1), (PAR, DYN)), ((4, 1), (PAR, ST)), ((4, 2), (GA, DYN))],
        "gqa": [((2, 1), (GA, DYN)), ((3, 1), (GA, ST)), ((3, 2), (PAR, DYN)), ((4, 2), (PAR, ST))]}


def make_inputs(binary, work, env):
    """{name: (input path, run options)}."""
    padded, packed, gqa, weights = (os.path.join(work, n) for n in ("padded.h5", "packed.h5", "gqa.h5", "w.h5"))
    commands = [
        [binary, "generate", "--output", padded, "--num-seqs", "29", "--seq-len", "48", "--dim", "32", "--heads", "2",
         "--min-len", "0", "--seed", "11"],
        [sys.executable, os.path.join(HERE, "..", "distributed", "make_pareto_input.py"), packed, "--num-seqs", "40",
         "--seq-len", "384", "--dim", "16", "--xm", "6", "--alpha", "1.3", "--longest", "3", "--layout", "packed",
         "--values", "--seed", "3"],
        [binary, "generate", "--output", gqa, "--num-seqs", "23", "--seq-len", "40", "--dim", "64", "--heads", "8",
         "--kv-heads", "2", "--min-len", "1", "--weights-out", weights, "--seed", "5"],
    ]
    for c in commands:
        made = run_with_timeout(c, TIMEOUT, env=env)
        if made is None or made.returncode != 0:
            print("FAIL: %s: %s" % (" ".join(c), made.stderr if made else "timed out"))
            sys.exit(1)
    return {
        "padded": (padded, ["--heads", "2", "--causal", "--save-weights", "all", "--unit-sequences", "3"]),
        "packed": (packed, ["--heads", "2", "--save-weights", "mean", "--weights-dtype", "f16"]),
        "gqa": (gqa, ["--weights", weights, "--causal", "--rope-theta", "10000", "--save-weights", "all",
                      "--unit-sequences", "3"]),
    }




def check_report(path, nodes, per_node, label, one_node=False):
    """The report's nodes, ranks per node and messaging layer. Returns 'layer over transports'."""
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        check(False, "%s: no readable --report: %s" % (label, e))
        return "?"
    messaging = report.get("messaging", {})
    check(report.get("nodes") == nodes, "%s: report says %s nodes, expected %d" % (label, report.get("nodes"), nodes))
    check(report.get("ranks_per_node") == [per_node] * nodes,
          "%s: report says ranks_per_node %s, expected %s" % (label, report.get("ranks_per_node"), [per_node] * nodes))
    expected_names = ["node%d" % (i + 1) for i in range(nodes)]
    check(report.get("node_names") == expected_names,
          "%s: report names the nodes %s, expected %s" % (label, report.get("node_names"), expected_names))
    expected = (["tcp"] if nodes > 1 else []) + (["vader"] if per_node > 1 else [])
    chooser = "attnbatch's one-node default" if one_node else "Open MPI"
    check(messaging.get("layer") == "ob1" and messaging.get("chosen_by") == chooser,
          "%s: messaging layer %r chosen by %r, expected ob1 chosen by %r" % (label, messaging.get("layer"),
                                                                               messaging.get("chosen_by"), chooser))
    check(messaging.get("transports") == expected,
          "%s: transports %s, expected %s" % (label, messaging.get("transports"), expected))
    return "%s over %s" % (messaging.get("layer"), "+".join(messaging.get("transports", [])) or "-")


def main():
    binary, mpiexec, work = rig.arguments(__doc__)
    env = rig.env()
    started = time.monotonic()
    inputs = make_inputs(binary, work, env)
    hostfiles = {(n, k): rig.hostfile(os.path.join(work, "hosts-%dx%d" % (n, k)), n, k) for n, k in LAYOUTS}
    table = []
    for case, (data, options) in inputs.items():
        common = ["run", "--input", data, "--threads", "1"] + options
        reference = os.path.join(work, case + "-reference.h5")
        result = run_with_timeout([binary] + common + ["--output", reference], TIMEOUT, env=env)
        if not check(result is not None and result.returncode == 0,
                     "%s: one-process run: %s" % (case, result.stderr if result else "timed out")):
            continue
        for (nodes, per_node), (io, schedule) in PLAN[case]:
            label = "%s %d nodes x %d ranks io=%s schedule=%s" % (case, nodes, per_node, io, schedule)
            output, report = (os.path.join(work, "%s-%dx%d.%s" % (case, nodes, per_node, e)) for e in ("h5", "json"))
            command = rig.mpirun(mpiexec, hostfiles[(nodes, per_node)], nodes, per_node,
                                 [binary] + common + ["--output", output, "--io", io, "--schedule", schedule,
                                                      "--report", report])
            t0 = time.monotonic()
            result = run_with_timeout(command, TIMEOUT, env=env)
            seconds = time.monotonic() - t0
            if result is None:
                check(False, "%s: no exit within %d s" % (label, TIMEOUT))
                continue
            if not check(result.returncode == 0, "%s: exit %d: %s" % (label, result.returncode, result.stderr.strip()[-600:])):
                continue
            check(not os.path.exists(output + ".partial"), "%s: %s.partial left behind" % (label, output))
            if case == "packed":
                check("long sequences split into" in result.stdout, "%s: the plan split no sequence" % label)
            check_same_results(reference, output, label, REFERENCE)
            messaging = check_report(report, nodes, per_node, label)
            table.append((case, nodes, per_node, io, schedule, messaging, "%.1f" % seconds))
            os.remove(output)
    # Two ranks on one node of the rig: the one-node default applies (shared memory only).
    data, options = inputs["padded"]
    one = os.path.join(work, "one-node.json")
    result = run_with_timeout(rig.mpirun(mpiexec, hostfiles[(2, 2)], 1, 2,
                                         [binary, "run", "--input", data, "--threads", "1", "--output",
                                          os.path.join(work, "one-node.h5"), "--report", one] + options),
                              TIMEOUT, env=env)
    if check(result is not None and result.returncode == 0, "one node x 2 ranks: %s" % (result.stderr if result else "timeout")):
        check_report(one, 1, 2, "one node x 2 ranks", one_node=True)

    print("\n%-7s %5s %13s %-8s %-8s %-22s %s" % ("input", "nodes", "ranks/node", "io", "schedule", "messaging", "seconds"))
    for row in table:
        print("%-7s %5d %13d %-8s %-8s %-22s %s" % row)
    print("%d multi-node runs byte-identical to one process checked in %.0f s" % (len(table), time.monotonic() - started))
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
