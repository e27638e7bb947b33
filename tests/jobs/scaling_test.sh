#!/usr/bin/env bash
# scaling_test.sh one_node|nodes ATTNBATCH WORKDIR - scripts/scaling.sh end to end on a tiny
# problem.
# one_node: --quick, 1 repeat, both sweeps over ranks {1,2} x threads {1,2}, then checks that
#   - runs.csv has one row per run (8), every 1-rank run succeeded with a PERFORMANCE time,
#     the --report phase times (read/compute/write/wait), and its PERFORMANCE line reports the
#     ranks and threads asked for;
#   - runs with 2 ranks either succeeded or were recorded as failed with an exit code and
#     an error line (the sweep went on);
#   - oversubscribed = 1 exactly where ranks x threads > cores;
#   - medians.csv has one row per configuration, speedup = efficiency = 1 at 1 x 1;
#   - speedup.png, efficiency.png and breakdown.png are PNG images.
# nodes: --nodes 1,2,4 x 1 rank x 1 thread on the multi-node rig, both sweeps: 6 runs, all ok,
#   each on as many nodes as its row says (its --report), nodes and ranks_per_node in both
#   CSVs, oversubscribed where the nodes' workers together exceed this host's cores, the
#   PNGs drawn. Exit 77 where the rig cannot run.
set -uo pipefail
# shellcheck source=tests/jobs/lib.sh
source "$(dirname "$0")/lib.sh"
[ $# = 3 ] || die "usage: $0 one_node|nodes ATTNBATCH WORKDIR"
mode=$1 BIN=$(realpath "$2") WORK=$3
rm -rf "$WORK"
t0=$SECONDS
rc=0
if [ "$mode" = nodes ]; then
    slurm_env   # the rig up, or exit 77
    bash "$REPO/scripts/scaling.sh" --nodes 1,2,4 --ranks 1 --threads 1 --repeats 1 --seqs 4 --seq-len 64 --dim 32 \
        --heads 2 --bin "$BIN" --out "$WORK" --timeout 60 || rc=$?
    check "scaling.sh --nodes 1,2,4 exits 0" test $rc = 0
    /usr/bin/python3 - "$WORK" "$(nproc)" <<'PYEOF' || fail "CSV/PNG checks (above)"
import csv, json, os, sys
out, cores = sys.argv[1], int(sys.argv[2])
runs = list(csv.DictReader(open(os.path.join(out, "runs.csv"))))
med = list(csv.DictReader(open(os.path.join(out, "medians.csv"))))
expected = sorted((m, n) for m in ("strong", "weak") for n in ("1", "2", "4"))
problems = []
if sorted((r["mode"], r["nodes"]) for r in runs) != expected:
    problems.append("runs.csv rows %s, expected strong and weak on 1, 2 and 4 nodes" % [(r["mode"], r["nodes"]) for r in runs])
for r in runs:
    n = int(r["nodes"])
    where = "%s on %d node(s)" % (r["mode"], n)
    if r["status"] != "ok" or r["reported_ranks"] != str(n) or r["ranks"] != str(n) or r["ranks_per_node"] != "1":
        problems.append("%s: status %s, ranks %s (reported %s), ranks_per_node %s"
                        % (where, r["status"], r["ranks"], r["reported_ranks"], r["ranks_per_node"]))
    if r["oversubscribed"] != ("1" if n > cores else "0"):
        problems.append("%s: oversubscribed=%s with %d cores shared by the rig's nodes" % (where, r["oversubscribed"], cores))
    report = os.path.join(out, "logs", "%s-n%d-p1-t1-r1.json" % (r["mode"], n))
    try:
        got = json.load(open(report))
        if got["nodes"] != n or got["ranks_per_node"] != [1] * n:
            problems.append("%s: its report says %s nodes x %s" % (where, got["nodes"], got["ranks_per_node"]))
    except (OSError, ValueError, KeyError) as e:
        problems.append("%s: report %s: %s" % (where, report, e))
if sorted((m["mode"], m["nodes"]) for m in med) != expected:
    problems.append("medians.csv rows %s" % [(m["mode"], m["nodes"]) for m in med])
for m in med:
    if m["nodes"] == "1" and (float(m["speedup"] or 0) != 1 or float(m["efficiency"] or 0) != 1):
        problems.append("%s on 1 node: speedup %s efficiency %s, expected 1" % (m["mode"], m["speedup"], m["efficiency"]))
    if m["nodes"] != "1" and not float(m["speedup"] or 0) > 0:
        problems.append("%s on %s nodes: no speedup" % (m["mode"], m["nodes"]))
for png in ("speedup.png", "efficiency.png", "breakdown.png"):
    path = os.path.join(out, png)
    if not os.path.exists(path) or open(path, "rb").read(8) != b"\x89PNG\r\n\x1a\n":
        problems.append("%s missing or not a PNG" % png)
for p in problems:
    print("FAIL:", p)
print("%d runs on 1, 2 and 4 nodes, %d medians, 3 PNGs checked" % (len(runs), len(med)))
sys.exit(1 if problems else 0)
PYEOF
    [ "$failures" = 0 ] && ok "runs.csv, medians.csv and the PNGs, across nodes"
    note "scaling test across nodes took $((SECONDS - t0)) s"
    finish
fi
bash "$REPO/scripts/scaling.sh" --quick --repeats 1 --seqs 4 --seq-len 64 --dim 32 --heads 2 \
    --bin "$BIN" --out "$WORK" --timeout 60 || rc=$?
check "scaling.sh exits 0 (at least one run succeeded)" test $rc = 0
/usr/bin/python3 - "$WORK" "$(nproc)" <<'PYEOF' || fail "CSV/PNG checks (above)"
import csv, os, sys
out, cores = sys.argv[1], int(sys.argv[2])
runs = list(csv.DictReader(open(os.path.join(out, "runs.csv"))))
med = list(csv.DictReader(open(os.path.join(out, "medians.csv"))))
problems = []
if len(runs) != 8:
    problems.append(f"runs.csv has {len(runs)} rows, expected 8")
for r in runs:
    p, t = int(r["ranks"]), int(r["threads"])
    where = f"{r['mode']} {p}x{t}"
    if r["oversubscribed"] != ("1" if p * t > cores else "0"):
        problems.append(f"{where}: oversubscribed={r['oversubscribed']} with {cores} cores")
    if r["status"] == "ok":
        if not float(r["seconds"] or 0) > 0:
            problems.append(f"{where}: ok without a time")
        if (r["reported_ranks"], r["reported_threads"]) != (str(p), str(t)):
            problems.append(f"{where}: PERFORMANCE says ranks={r['reported_ranks']} threads={r['reported_threads']}")
        for k in ("read", "compute", "write", "wait"):
            if r[k] == "":
                problems.append(f"{where}: no {k} time from the report")
    elif p == 1:
        problems.append(f"{where}: a 1-rank run failed: {r['status']} {r['exit_code']} {r['error']}")
    elif r["status"] not in ("failed", "timeout") or r["exit_code"] in ("", "0") or not r["error"]:
        problems.append(f"{where}: failure not recorded properly: {r}")
if len(med) != 8:
    problems.append(f"medians.csv has {len(med)} rows, expected 8")
for m in med:
    if m["ranks"] == "1" and m["threads"] == "1" and (float(m["speedup"] or 0) != 1 or float(m["efficiency"] or 0) != 1):
        problems.append(f"{m['mode']} 1x1: speedup {m['speedup']} efficiency {m['efficiency']}, expected 1")
for png in ("speedup.png", "efficiency.png", "breakdown.png"):
    path = os.path.join(out, png)
    if not os.path.exists(path) or open(path, "rb").read(8) != b"\x89PNG\r\n\x1a\n":
        problems.append(f"{png} missing or not a PNG")
for p in problems:
    print("FAIL:", p)
ok_runs = sum(r["status"] == "ok" for r in runs)
print(f"{len(runs)} runs ({ok_runs} ok), {len(med)} medians, 3 PNGs checked")
sys.exit(1 if problems else 0)
PYEOF
[ "$failures" = 0 ] && ok "runs.csv, medians.csv and the PNGs"
note "scaling test took $((SECONDS - t0)) s"
finish
