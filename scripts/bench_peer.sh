#!/usr/bin/env bash
# End-to-end benchmark against the script a user would write instead of attnbatch
# (attn_mpi_h5.py: mpi4py + h5py + numpy, kept outside this repository), on the same input, same ranks,
# in one sitting, runs interleaved (peer, attnbatch, peer, ...) so that the machine's noise
# hits both alike. Times are whole commands (mpirun start to exit), medians of REPEAT.
#
#   scripts/bench_peer.sh --peers DIR [--repeat R] [--num-seqs N] [--seq-len L] [--dim D] [--out DIR]
#                         [--bind core|none]
#
# --bind: core (each rank bound to its share of the cores, scripts/mpi_placement.sh: a core of
# its own at np=2 on two cores, Open MPI's default and the peer script's own launch line; both
# at np=1) or none (--bind-to none for every run; it slowed both tools, see scripts/bench_e2e.sh).
# --peers DIR (or PEERS=DIR in the environment, required): the directory holding the peer
# scripts attn_mpi_h5.py and gen_input.py. scripts/bench_e2e.sh measures the same cases
# against the limit and with the peer's BLAS both as installed and forced.
#
# Prints a table: peer vs attnbatch at np=2 (1 thread per rank) without and with --proj and
# --weights, the speedup, attnbatch's np=1 vs np=2 strong-scaling efficiency, and the share
# of I/O hidden behind compute from attnbatch's --report.
set -euo pipefail
cd "$(dirname "$0")/.."
peers=${PEERS:-} repeat=3 n=2048 len=256 dim=64 out=/tmp/attnbatch-bench-peer bind=core
while [[ $# -gt 0 ]]; do
  case $1 in
    --peers) peers=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --num-seqs) n=$2; shift 2 ;;
    --seq-len) len=$2; shift 2 ;;
    --dim) dim=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --bind) bind=$2; shift 2 ;;
    *) echo "bench_peer.sh: unknown option $1 (expected --peers --repeat --num-seqs --seq-len --dim --out --bind)" >&2; exit 2 ;;
  esac
done
[[ $bind == core || $bind == none ]] || { echo "bench_peer.sh: --bind $bind: expected core or none" >&2; exit 2; }
bin=${BIN:-$PWD/build/attnbatch}
if [[ -z $peers || ! -f $peers/attn_mpi_h5.py || ! -f $peers/gen_input.py ]]; then
  echo "bench_peer.sh: the peer scripts' directory is required (--peers DIR or PEERS=DIR), holding attn_mpi_h5.py and gen_input.py" >&2
  exit 2
fi
python=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"
input=$out/in.h5
[[ -f $input ]] || "$python" "$peers/gen_input.py" "$input" "$n" "$len" "$dim" >/dev/null

# shellcheck source=scripts/bench_timing.sh
source scripts/bench_timing.sh

# shellcheck source=scripts/mpi_placement.sh
source scripts/mpi_placement.sh
read -r -a place2 <<<"$(placement "$bind" 2 1)"
read -r -a place1 <<<"$(placement "$bind" 1 1)"
mpi=(mpirun --oversubscribe -x OPENBLAS_NUM_THREADS=1 -x OMP_NUM_THREADS=1)
results=$out/results.csv
echo "case,tool,ranks,run,seconds" >"$results"
for variant in plain proj_weights; do
  peer_flags=() ours_flags=(--save-weights none)
  if [[ $variant == proj_weights ]]; then
    peer_flags=(--proj --weights) ours_flags=(--weights "$input" --save-weights all)
  fi
  for r in $(seq "$repeat"); do
    rm -f "$out/peer.h5" "$out/ours.h5" "$out/ours1.h5"
    s=$(timed "${mpi[@]}" -np 2 "${place2[@]}" "$python" "$peers/attn_mpi_h5.py" "$input" "$out/peer.h5" "${peer_flags[@]}")
    echo "$variant,peer,2,$r,$s" >>"$results"
    s=$(timed "${mpi[@]}" -np 2 "${place2[@]}" "$bin" run --input "$input" --output "$out/ours.h5" --threads 1 "${ours_flags[@]}" \
      --report "$out/report_${variant}_np2.json")
    echo "$variant,attnbatch,2,$r,$s" >>"$results"
    s=$(timed "${mpi[@]}" -np 1 "${place1[@]}" "$bin" run --input "$input" --output "$out/ours1.h5" --threads 1 "${ours_flags[@]}")
    echo "$variant,attnbatch,1,$r,$s" >>"$results"
  done
done
rm -f "$out/peer.h5" "$out/ours.h5" "$out/ours1.h5"

"$python" - "$results" "$out" "$n" "$len" "$dim" <<'EOF'
import csv, json, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
out = sys.argv[2]
def med(case, tool, ranks):
    return statistics.median(float(r["seconds"]) for r in rows
                             if r["case"] == case and r["tool"] == tool and r["ranks"] == str(ranks))
print("input: N=%s L=%s d=%s float32; medians of whole mpirun commands, interleaved" % tuple(sys.argv[3:6]))
print("%-14s %10s %12s %8s %12s %11s %10s" % ("case", "peer np=2", "attnbatch np=2", "speedup", "attnbatch np=1",
                                             "efficiency", "I/O hidden"))
for case in ("plain", "proj_weights"):
    peer, ours, one = med(case, "peer", 2), med(case, "attnbatch", 2), med(case, "attnbatch", 1)
    report = json.load(open("%s/report_%s_np2.json" % (out, case)))
    print("%-14s %9.2fs %13.2fs %7.1fx %13.2fs %10.0f%% %9.0f%%" % (
        case, peer, ours, peer / ours, one, 100 * one / (2 * ours), 100 * report["io_hidden_fraction"]))
EOF
echo "runs: $results"
