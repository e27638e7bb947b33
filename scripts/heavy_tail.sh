#!/usr/bin/env bash
# Heavy-tailed batches: the figures of docs/performance.md "Heavy-tailed batches", in one sitting.
#
#   scripts/heavy_tail.sh [--out DIR] [--quick]
#
#   1. plans of a Pareto set (20,000 sequences, L = 16,384, d = 64, mean about 490, the longest
#      over 30 times the mean; data left unallocated) for 16 to 4096 ranks with
#      `run --dry-run --simulate-ranks P`, static and dynamic; with BASE=path/to/attnbatch the
#      same plans by another build (without pieces) beside them;
#   2. the CPU time of the plan of 10 million such sequences for 4096 ranks;
#   3. real runs on smaller heavy-tailed sets (packed, with values; their longest sequences
#      outweigh a third of the whole): `mpirun -np 3` against `-np 1`, /output, /lse and
#      /attention (the longest sequence's maps) compared byte for byte; then a longer run (about
#      150 GFLOP per rank) whose measured imbalance (--report) is compared with the predicted;
#   4. the sizes of that set's input and output files, packed and padded;
#   5. peak RSS of one sequence of L = 8192, H = 2, --save-weights all under --max-memory 256M.
# Writes results.txt and plans.csv into DIR (default /tmp/attnbatch-heavy-tail); --quick skips 2 and 5.
set -euo pipefail
cd "$(dirname "$0")/.."
out=/tmp/attnbatch-heavy-tail quick=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "heavy_tail.sh: unknown option $1 (expected --out DIR, --quick)" >&2; exit 2 ;;
  esac
done
bin=${BIN:-$PWD/build/attnbatch}
base=${BASE:-}
python=/usr/bin/python3
make_input=$PWD/tests/distributed/make_pareto_input.py
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mkdir -p "$out"
results=$out/results.txt
: >"$results"
say() { echo "$@" | tee -a "$results"; }
plan_field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; }

say "== 1. plans of 20,000 Pareto sequences (L = 16384, d = 64, H = 1)"
set20k=$out/pareto20k.h5
[[ -f $set20k ]] || "$python" "$make_input" "$set20k" --num-seqs 20000 --seq-len 16384 --dim 64 | tee -a "$results"
echo "binary,schedule,ranks,units,imbalance_percent,idle_ranks,largest_unit_percent,split_sequences,pieces,seconds" >"$out/plans.csv"
for which in new ${base:+base}; do
  b=$bin; [[ $which == base ]] && b=$base
  for schedule in static dynamic; do
    for ranks in 16 64 128 512 1024 4096; do
      start=$EPOCHREALTIME
      line=$("$b" run --input "$set20k" --output "$out/none.h5" --dry-run --simulate-ranks "$ranks" --schedule "$schedule" | grep '^PLAN')
      seconds=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
      echo "$which,$schedule,$ranks,$(plan_field "$line" units),$(plan_field "$line" imbalance_percent),$(plan_field "$line" idle_ranks),$(plan_field "$line" largest_unit_percent),$(plan_field "$line" split_sequences),$(plan_field "$line" pieces),$seconds" >>"$out/plans.csv"
    done
  done
done
column -s, -t "$out/plans.csv" | tee -a "$results"

if [[ $quick == 0 ]]; then
  say "== 2. the plan of 10 million Pareto sequences for 4096 ranks"
  set10m=$out/pareto10m.h5
  [[ -f $set10m ]] || "$python" "$make_input" "$set10m" --num-seqs 10000000 --seq-len 16384 --dim 64 --seed 2 | tee -a "$results"
  /usr/bin/time -f "dry run: %e s wall, %U s user + %S s system, peak RSS %M KiB" \
    "$bin" run --input "$set10m" --output "$out/none.h5" --dry-run --simulate-ranks 4096 2>&1 | grep -E '^PLAN|dry run:' | tee -a "$results"
fi

say "== 3. mpirun -np 3 against -np 1 on a heavy-tailed packed set with values"
small=$out/pareto-packed.h5
[[ -f $small ]] || "$python" "$make_input" "$small" --num-seqs 2000 --seq-len 4096 --dim 64 --xm 20 --alpha 1.5 --longest 2 \
  --layout packed --values --seed 4 | tee -a "$results"
longest=$("$python" -c "import h5py, numpy as np; o = h5py.File('$small')['offsets'][()]; print(int(np.argmax(np.diff(o))))")
common=(run --input "$small" --heads 2 --causal --threads 1 --save-weights mean --weights-seqs "$longest:$((longest + 1))" --progress never)
rm -f "$out"/np1.h5* "$out"/np3.h5*
"$bin" "${common[@]}" --output "$out/np1.h5" --report "$out/np1.json" | grep -E '^PERFORMANCE' | tee -a "$results"
mpirun -np 3 --oversubscribe --bind-to none "$bin" "${common[@]}" --output "$out/np3.h5" --report "$out/np3.json" >"$out/np3.log"
grep -E 'plan:|idle ranks|rank [0-9]:|^PERFORMANCE' "$out/np3.log" | tee -a "$results"
"$python" - "$out/np1.h5" "$out/np3.h5" "$out/np3.json" <<'PY' | tee -a "$results"
import json, sys
import h5py
a, b, report = sys.argv[1:]
with h5py.File(a, "r") as f, h5py.File(b, "r") as g:
    for name in ("output", "lse", "attention"):
        same = f[name][()].tobytes() == g[name][()].tobytes()
        print("/%s %s: %s" % (name, g[name].shape, "byte-identical" if same else "DIFFERENT"))
    rows = g["journal/unit_rows"][()] if "journal/unit_rows" in g else []
    print("pieces in the 3-rank journal: %d of %d units" % (sum(1 for u in range(len(rows) - 1) if rows[u] or rows[u + 1]),
                                                            g["journal/progress"].shape[0]))
r = json.load(open(report))
print("measured imbalance %.2f%%, predicted %.2f%%, per-rank compute %s s (3 ranks on %s, oversubscribed)"
      % (100 * r["imbalance"], 100 * r["predicted_imbalance"], [round(p["compute"], 2) for p in r["per_rank"]],
         "this machine's cores"))
PY

timing=$out/pareto-timing.h5
[[ -f $timing ]] || "$python" "$make_input" "$timing" --num-seqs 12000 --seq-len 16384 --dim 64 --xm 40 --alpha 1.5 --longest 3 \
  --layout packed --values --seed 6 | tee -a "$results"
for _ in 1 2 3; do
  rm -f "$out"/timing.h5*
  mpirun -np 3 --oversubscribe --bind-to none "$bin" run --input "$timing" --heads 2 --threads 1 --save-weights none \
    --output "$out/timing.h5" --report "$out/timing.json" --progress never 2>/dev/null | grep -E 'plan:|^PERFORMANCE' | tee -a "$results"
  "$python" -c "
import json
r = json.load(open('$out/timing.json'))
print('  measured imbalance %.2f%%, predicted %.2f%%; per-rank compute %s s, GFLOP %s' % (100 * r['imbalance'],
      100 * r['predicted_imbalance'], [round(p['compute'], 2) for p in r['per_rank']],
      [round(p['attention_gflop'] + p['projection_gflop'], 1) for p in r['per_rank']]))" | tee -a "$results"
done

say "== 4. file sizes of that set, packed and padded"
padded=$out/pareto-padded.h5
[[ -f $padded ]] || "$python" "$make_input" "$padded" --num-seqs 2000 --seq-len 4096 --dim 64 --xm 20 --alpha 1.5 --longest 2 \
  --layout padded --values --seed 4 >/dev/null
rm -f "$out"/out-packed.h5* "$out"/out-padded.h5*
"$bin" run --input "$small" --heads 2 --save-weights none --output "$out/out-packed.h5" --progress never >/dev/null
"$bin" run --input "$padded" --heads 2 --save-weights none --output "$out/out-padded.h5" --progress never >/dev/null
for f in "$small" "$padded" "$out/out-packed.h5" "$out/out-padded.h5"; do
  say "$(stat -c '%s' "$f" | awk '{ printf "%10.1f MiB", $1 / 1048576 }')  $(basename "$f")"
done
"$bin" verify --input "$small" --output "$out/out-packed.h5" --samples 16 | tail -1 | tee -a "$results"

if [[ $quick == 0 ]]; then
  say "== 5. one sequence of L = 8192, H = 2, --save-weights all under --max-memory 256M"
  long=$out/long.h5
  [[ -f $long ]] || "$bin" generate --output "$long" --num-seqs 1 --seq-len 8192 --dim 64 --heads 2 --seed 1 >/dev/null
  rm -f "$out"/long-out.h5*
  /usr/bin/time -f "peak RSS %M KiB, %e s" "$bin" run --input "$long" --heads 2 --save-weights all --max-memory 256M \
    --output "$out/long-out.h5" --progress never 2>&1 | grep -E 'done:|peak RSS' | tee -a "$results"
  "$bin" verify --input "$long" --output "$out/long-out.h5" --samples all | tail -1 | tee -a "$results"
fi
echo "results in $results"
