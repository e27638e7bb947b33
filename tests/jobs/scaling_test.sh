#!/usr/bin/env bash
# scaling_test.sh ATTNBATCH WORKDIR - scripts/scaling.sh end to end on a tiny problem
# (--quick, 1 repeat): both sweeps over ranks {1,2} x threads {1,2}, then checks that
#   - runs.csv has one row per run (8), every 1-rank run succeeded with a PERFORMANCE time,
#     the --report phase times (read/compute/write), and its PERFORMANCE line reports the
#     ranks and threads asked for;
#   - runs with 2 ranks either succeeded or were recorded as failed with an exit code and
#     an error line (the sweep went on);
#   - oversubscribed = 1 exactly where ranks x threads > cores;
#   - medians.csv has one row per configuration, speedup = efficiency = 1 at 1 x 1;
#   - speedup.png, efficiency.png and breakdown.png are PNG images.
set -uo pipefail
# shellcheck source=tests/jobs/lib.sh
source "$(dirname "$0")/lib.sh"
[ $# = 2 ] || die "usage: $0 ATTNBATCH WORKDIR"
BIN=$(realpath "$1") WORK=$2
rm -rf "$WORK"
t0=$SECONDS
rc=0
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
        for k in ("read", "compute", "write"):
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
