#!/usr/bin/env bash
# Grouped-query attention and rotary embeddings end to end: `attnbatch run` with projections on
# the same embeddings (N sequences of L = 512 tokens, d = 512, H = 8 query heads of d_k = 64,
# causal, one thread, no weights stored) for G = 8 (multi-head), 2 (grouped) and 1 (multi-query)
# K/V heads, and G = 2 with --rope-theta. Configurations interleaved REPEAT times (the machine
# is shared); the median of each one's compute seconds and end-to-end seconds (from the
# PERFORMANCE line), the fastest run's compute seconds (on a busy machine the least disturbed),
# and their ratios to G = 8. Raw runs: scripts/figures/gqa/runs.csv.
#   scripts/bench_gqa.sh [REPEAT] [N]        (defaults 5 and 64)   BIN=build/attnbatch
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=${1:-5}
n=${2:-64}
bin=${BIN:-build/attnbatch}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=scripts/figures/gqa
mkdir -p "$out"
for g in 8 2 1; do
  "$bin" generate --output "$work/in.h5" --weights-out "$work/w$g.h5" --num-seqs "$n" --seq-len 512 --dim 512 \
    --heads 8 --kv-heads "$g" --seed 3 --force >/dev/null
done
configs=("8|" "2|" "1|" "2|--rope-theta 10000")
echo "config,repeat,compute_seconds,seconds" >"$out/runs.csv"
for r in $(seq "$repeat"); do
  for c in "${configs[@]}"; do
    g=${c%%|*}
    extra=${c#*|}
    # shellcheck disable=SC2086  # extra is a list of options
    line=$("$bin" run --input "$work/in.h5" --weights "$work/w$g.h5" --causal --save-weights none --threads 1 \
      --output "$work/out.h5" --force --progress never --report "$work/r.json" $extra | grep '^PERFORMANCE')
    seconds=$(sed -E 's/.* seconds=([0-9.]+).*/\1/' <<<"$line")
    compute=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['per_rank'][0]['compute'])" "$work/r.json")
    echo "G=$g${extra:+ rope},$r,$compute,$seconds" >>"$out/runs.csv"
  done
done
/usr/bin/python3 - "$out/runs.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
configs = list(dict.fromkeys(r["config"] for r in rows))
def stats(c, key):
    values = [float(r[key]) for r in rows if r["config"] == c]
    return statistics.median(values), min(values)
base = {k: stats(configs[0], k) for k in ("compute_seconds", "seconds")}
print("| K/V heads | compute s, median (min) | vs G = 8, median (min) | end to end s, median | vs G = 8 |")
print("| --- | --- | --- | --- | --- |")
for c in configs:
    (cm, cn), (em, _) = stats(c, "compute_seconds"), stats(c, "seconds")
    print("| %s | %.3f (%.3f) | %.2f (%.2f) | %.3f | %.2f |" % (c, cm, cn, cm / base["compute_seconds"][0],
          cn / base["compute_seconds"][1], em, em / base["seconds"][0]))
PY
