#!/usr/bin/env bash
# scaling.sh - strong and weak scaling sweeps of `attnbatch run` over MPI ranks x OpenMP
# threads, with repeats; every run goes to runs.csv, the median of each configuration to
# medians.csv, and scripts/plot_scaling.py draws speedup, efficiency and the phase breakdown
# into PNGs next to them.
#
#   scripts/scaling.sh --quick --out scaling/            # about a minute
#   scripts/scaling.sh --ranks "1 2 4" --threads "1 2" --repeats 5 --seqs 256 --out scaling/
#   scripts/scaling.sh --nodes 1,2,4 --ranks 2 --threads 1 --hostfile hosts --out scaling/
#
# Strong scaling: the same batch (--seqs sequences) for every configuration;
#   speedup = T(1x1) / T(P x T), efficiency = speedup / (P*T).
# Weak scaling: --seqs sequences per worker (P*T workers), so the work grows with them;
#   efficiency = T(1x1) / T(P x T), scaled speedup = P*T * efficiency.
# Across N nodes the workers are N*P*T and the baseline is 1 node x 1 rank x 1 thread.
# Each run: mpirun -np P --map-by slot:PE=C --bind-to core attnbatch run --threads T ...
# --report FILE.json, C = cores / P: each rank bound to its share of the cores, T of them for
# its threads and the rest for its writing thread (with more workers than cores, --bind-to
# none, and --oversubscribe with more ranks than cores); across N nodes, mpirun --hostfile (the
# first N hosts) -np N*P --map-by ppr:P:node:PE=C, P ranks on each node (the workers are N*P*T;
# on the rig, whose nodes share this host's cores, nothing is bound: each node would bind its
# ranks to the same cores); the PERFORMANCE line and the report's per-rank phase times (read,
# compute, communicate, write, idle, and `wait` for the other ranks; mean over ranks) are
# recorded. A configuration with more workers than cores is flagged oversubscribed=1 (its
# times say little about scaling: on the rig's nodes, which share this host's cores, that is
# any N*P*T above them). A run that fails (e.g. more ranks than this build supports) is
# recorded with its exit code and error line, and the sweep goes on; the script exits non-zero
# only if no run succeeded.
#
# Options:
#   --out DIR          where CSVs, PNGs, inputs and logs go [scaling-results]
#   --quick            ranks "1 2", threads "1 2", 2 repeats, a small problem
#   --ranks LIST       MPI ranks (per node) to sweep ["1 2 4"]   --threads LIST  threads ["1 2"]
#   --nodes LIST       node counts, e.g. 1,2,4 [1]: the first N hosts of --hostfile
#   --hostfile FILE    the hosts for --nodes above 1 [Slurm's allocation inside a job, else the
#                      nodes of tests/cluster/local-cluster.sh when that rig is up]
#   --repeats R        runs per configuration [3]          --mode strong|weak|both [both]
#   --seqs N           strong: sequences in total; weak: per worker [128; quick 32]
#   --seq-len L [512]  --dim D [128; quick 64]  --heads H [4]
#   --run-args "..."   extra `attnbatch run` options [--save-weights none]
#   --bin PATH         the attnbatch binary [$ATTNBATCH, else build/attnbatch]
#   --timeout S        per run [600]                       --no-plot  CSVs only
#   --bind core|none   core: each rank bound to its share of the cores where the run's
#                      threads fit (docs/clusters.md "Placement"); none: every run
#                      --bind-to none, threads where the OS puts them [core]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/mpi_placement.sh
source "$repo/scripts/mpi_placement.sh"
PY=/usr/bin/python3   # Debian's python with h5py, numpy, matplotlib

out=scaling-results quick=0 ranks="1 2 4" threads="1 2" repeats=3 mode=both nodes_list=1 hostfile=""
seqs=128 seq_len=512 dim=128 heads=4 run_args="--save-weights none" timeout_s=600 plot=1 bind=core
bin=${ATTNBATCH:-$repo/build/attnbatch}
explicit=()
while [ $# -gt 0 ]; do
    case $1 in
        --out) out=$2; shift 2 ;;
        --quick) quick=1; shift ;;
        --ranks) ranks=$2; explicit+=(ranks); shift 2 ;;
        --threads) threads=$2; explicit+=(threads); shift 2 ;;
        --nodes) nodes_list=${2//,/ }; shift 2 ;;
        --hostfile) hostfile=$2; shift 2 ;;
        --repeats) repeats=$2; explicit+=(repeats); shift 2 ;;
        --mode) mode=$2; shift 2 ;;
        --seqs) seqs=$2; explicit+=(seqs); shift 2 ;;
        --seq-len) seq_len=$2; explicit+=(seq_len); shift 2 ;;
        --dim) dim=$2; explicit+=(dim); shift 2 ;;
        --heads) heads=$2; shift 2 ;;
        --run-args) run_args=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --timeout) timeout_s=$2; shift 2 ;;
        --no-plot) plot=0; shift ;;
        --bind) bind=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "scaling.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
given() { local x; for x in "${explicit[@]}"; do [ "$x" = "$1" ] && return 0; done; return 1; }
if [ $quick = 1 ]; then
    given ranks || ranks="1 2"
    given threads || threads="1 2"
    given repeats || repeats=2
    given seqs || seqs=32
    given seq_len || seq_len=512
    given dim || dim=64
    [ "$timeout_s" = 600 ] && timeout_s=120
fi
case $bind in core|none) ;; *) echo "scaling.sh: --bind core|none" >&2; exit 2 ;; esac
case $mode in strong) modes=(strong) ;; weak) modes=(weak) ;; both) modes=(strong weak) ;;
    *) echo "scaling.sh: --mode strong|weak|both" >&2; exit 2 ;; esac
[ -x "$bin" ] || { echo "scaling.sh: $bin is not executable (build it, or pass --bin / set ATTNBATCH)" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "scaling.sh: mpirun not found" >&2; exit 2; }
cores=$(nproc)
for n in $nodes_list; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "scaling.sh: --nodes $nodes_list: expected counts such as 1,2,4" >&2; exit 2; }
done

mkdir -p "$out/data" "$out/logs"
out=$(cd "$out" && pwd)
runs_csv=$out/runs.csv
echo "mode,nodes,ranks_per_node,ranks,threads,workers,repeat,sequences,seq_len,dim,heads,cores,oversubscribed,status,exit_code,reported_ranks,reported_threads,seconds,seqs_per_s,tokens,compute_gflops,end_to_end_gflops,read,compute,communicate,write,idle,wait,imbalance,error" >"$runs_csv"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# The hosts for runs on more than one node: --hostfile, Slurm's allocation, or the rig's
# nodes (then with its Open MPI settings: the rsh agent that enters a node, its subnet). The
# rig's nodes share this host's cores: its workers are counted against them all together.
hosts=() one_host=0 source=""
most=1
for n in $nodes_list; do [ "$n" -gt "$most" ] && most=$n; done
if [ "$most" -gt 1 ]; then
    rig=$repo/tests/cluster/local-cluster.sh
    if [ -n "$hostfile" ]; then
        [ -r "$hostfile" ] || { echo "scaling.sh: --hostfile $hostfile is not readable" >&2; exit 2; }
        mapfile -t hosts < <(awk '!/^[[:space:]]*(#|$)/ && !seen[$1]++ { print $1 }' "$hostfile")
        source=$hostfile
    elif [ -n "${SLURM_JOB_NODELIST:-}" ]; then
        mapfile -t hosts < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
        source="Slurm job $SLURM_JOB_ID"
    elif bash "$rig" status >/dev/null 2>&1; then
        eval "$(bash "$rig" env)"
        mapfile -t hosts < <(bash "$rig" nodes)
        one_host=1 source="the rig (namespaces of this host, sharing its $cores cores)"
    else
        echo "scaling.sh: --nodes $nodes_list needs hosts: --hostfile FILE, a Slurm allocation, or the rig (tests/cluster/local-cluster.sh start)" >&2
        exit 2
    fi
    [ "${#hosts[@]}" -ge "$most" ] || { echo "scaling.sh: --nodes $nodes_list but only ${#hosts[@]} host(s): ${hosts[*]}" >&2; exit 2; }
    echo "scaling: hosts from $source: ${hosts[*]}"
fi

input_for() {  # input_for N: a cached input of N sequences
    local n=$1 f=$out/data/in-$1-$seq_len-$dim-$heads.h5
    if [ ! -s "$f" ]; then
        "$bin" generate --output "$f" --num-seqs "$n" --seq-len "$seq_len" --dim "$dim" --heads "$heads" \
            --seed 1 --force >/dev/null
    fi
    echo "$f"
}

# field KEY LINE: the value of KEY=... in a PERFORMANCE line
field() { sed -n "s/.*[ ]$1=\([^ ]*\).*/\1/p" <<<"$2" | head -n1; }

# phases REPORT.json: "read,compute,communicate,write,idle,wait,imbalance" (mean over ranks;
# wait: for the other ranks, where imbalance costs)
phases() {
    "$PY" - "$1" <<'EOF' 2>/dev/null || echo ",,,,,,"
import json, sys
r = json.load(open(sys.argv[1]))
ranks = r.get("per_rank", [])
mean = lambda k: sum(float(p.get(k, 0)) for p in ranks) / max(1, len(ranks))
print(",".join(f"{mean(k):.6g}" for k in ("read", "compute", "communicate", "write", "idle", "wait"))
      + f",{float(r.get('imbalance', 0)):.6g}")
EOF
}

csv_text() { tr ',\n"' ';  ' <<<"$1" | cut -c1-200; }

total=0 good=0
t_sweep=$SECONDS
for m in "${modes[@]}"; do
  for nodes in $nodes_list; do
    for p in $ranks; do
        for t in $threads; do
            workers=$((nodes * p * t))
            if [ "$m" = strong ]; then n=$seqs; else n=$((seqs * workers)); fi
            input=$(input_for "$n")
            over=0
            # Per node, or all together where the nodes share this host.
            if [ $one_host = 1 ]; then [ $workers -gt "$cores" ] && over=1; else [ $((p * t)) -gt "$cores" ] && over=1; fi
            # Each rank bound to its share of the node's cores, which holds its t threads: Open
            # MPI would otherwise bind a rank to one core, where its writing thread takes turns
            # with the compute, or leave its threads to wander. Not where they do not fit, nor on
            # the rig (its nodes would bind their ranks to the same cores of this host).
            pe="" binding=none
            if [ "$bind" = core ] && [ $over = 0 ] && { [ "$nodes" = 1 ] || [ $one_host = 0 ]; }; then
                pe=:PE=$(rank_share "$p" "$t") binding=core
            fi
            if [ "$nodes" = 1 ]; then
                # One node: shared memory only.
                mpi=(env OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader}" mpirun -np "$p")
                [ -n "$pe" ] && mpi+=(--map-by "slot$pe")
            else
                printf '%s slots='"$p"'\n' "${hosts[@]:0:$nodes}" >"$out/logs/hosts-$nodes-$p"
                mpi=(mpirun --hostfile "$out/logs/hosts-$nodes-$p" -np $((nodes * p)) --map-by "ppr:$p:node$pe")
            fi
            mpi+=(--bind-to "$binding")
            [ "$p" -gt "$cores" ] && mpi+=(--oversubscribe)
            for r in $(seq 1 "$repeats"); do
                tag=$m-n$nodes-p$p-t$t-r$r
                log=$out/logs/$tag.log report=$out/logs/$tag.json
                rm -f "$report" "$out/data/out.h5" "$out/data/out.h5.partial"
                [ "$r" = 1 ] && echo "scaling: $m nodes=$nodes ranks=$p/node threads=$t: ${mpi[*]}"
                rc=0
                # shellcheck disable=SC2086  # run_args is a list of options
                OMP_NUM_THREADS=$t timeout "$timeout_s" "${mpi[@]}" -x OMP_NUM_THREADS "$bin" run \
                    --input "$input" --output "$out/data/out.h5" --heads "$heads" --threads "$t" --progress never \
                    --report "$report" $run_args >"$log" 2>&1 || rc=$?
                total=$((total + 1))
                perf=$(grep -m1 '^PERFORMANCE ' "$log" || true)
                if [ $rc = 0 ] && [ -n "$perf" ]; then
                    status=ok error=""
                    good=$((good + 1))
                else
                    status=failed
                    [ $rc = 124 ] && status=timeout
                    [ $rc = 0 ] && status=no-performance-line
                    # The first error line, from "error:" on (ranks may interleave their prefixes).
                    error=$(grep -m1 -oiE '(error|abort)[: ].*' "$log" || tail -n1 "$log" || true)
                    error=$(csv_text "$error" | sed 's/ *$//')
                fi
                ph=",,,,,,"
                [ -s "$report" ] && ph=$(phases "$report")
                printf '%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,"%s"\n' \
                    "$m" "$nodes" "$p" $((nodes * p)) "$t" "$workers" "$r" "$n" "$seq_len" "$dim" "$heads" "$cores" "$over" "$status" "$rc" \
                    "$(field ranks "$perf")" "$(field threads "$perf")" "$(field seconds "$perf")" "$(field seqs_per_s "$perf")" "$(field tokens "$perf")" \
                    "$(field compute_gflops "$perf")" "$(field end_to_end_gflops "$perf")" "$ph" "$error" >>"$runs_csv"
                printf 'scaling: %-6s nodes=%s ranks=%s/node threads=%s repeat %s: %s%s\n' "$m" "$nodes" "$p" "$t" "$r" "$status" \
                    "${perf:+ ($(field seconds "$perf") s, $(field seqs_per_s "$perf") seq/s)}${error:+: $error}"
            done
        done
    done
  done
done
rm -f "$out/data/out.h5" "$out/data/out.h5.partial"

# Medians per configuration, with speedup and efficiency against 1 node x 1 rank x 1 thread.
"$PY" - "$runs_csv" "$out/medians.csv" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
key = lambda r: (r["mode"], int(r["nodes"]), int(r["ranks_per_node"]), int(r["threads"]))
keys = []
for r in rows:
    if key(r) not in keys:
        keys.append(key(r))
def med(rs, col):
    vals = [float(r[col]) for r in rs if r[col] not in ("", None)]
    return statistics.median(vals) if vals else None
summary = {}
for k in keys:
    rs = [r for r in rows if key(r) == k]
    good = [r for r in rs if r["status"] == "ok"]
    summary[k] = (rs, good)
fields = ["mode", "nodes", "ranks_per_node", "ranks", "threads", "workers", "sequences", "oversubscribed", "runs",
          "runs_ok", "status", "median_seconds", "median_seqs_per_s", "median_compute_gflops", "median_end_to_end_gflops",
          "read", "compute", "communicate", "write", "idle", "wait", "speedup", "efficiency", "error"]
with open(sys.argv[2], "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(fields)
    for (mode, nodes, p, t), (rs, good) in summary.items():
        base = summary.get((mode, 1, 1, 1), ([], []))[1]
        t1 = med(base, "seconds")
        tp = med(good, "seconds")
        workers = nodes * p * t
        speedup = efficiency = None
        if t1 and tp:
            if mode == "strong":
                speedup = t1 / tp
                efficiency = speedup / workers
            else:
                efficiency = t1 / tp
                speedup = workers * efficiency
        fmt = lambda v: "" if v is None else f"{v:.6g}"
        status = "ok" if len(good) == len(rs) else ("failed" if not good else "partial")
        errors = sorted({r["error"] for r in rs if r["error"]})
        w.writerow([mode, nodes, p, nodes * p, t, workers, rs[0]["sequences"], rs[0]["oversubscribed"], len(rs), len(good),
                    status, fmt(tp), fmt(med(good, "seqs_per_s")), fmt(med(good, "compute_gflops")),
                    fmt(med(good, "end_to_end_gflops"))]
                   + [fmt(med(good, c)) for c in ("read", "compute", "communicate", "write", "idle", "wait")]
                   + [fmt(speedup), fmt(efficiency), errors[0] if errors else ""])
EOF

echo "scaling: $good of $total runs succeeded in $((SECONDS - t_sweep)) s; $runs_csv, $out/medians.csv"
if [ $plot = 1 ]; then
    "$PY" "$repo/scripts/plot_scaling.py" "$out"
fi
[ $good -gt 0 ]
