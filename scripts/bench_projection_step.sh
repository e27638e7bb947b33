#!/usr/bin/env bash
# bench_projection_step.sh - what projections and stored attention maps cost against the
# attention kernel alone: `attnbatch bench --projections --save-weights all` (run's step compute:
# Q/K/V projections, attention keeping every map, output projection) in turns with the kernel
# without maps, on the shapes of issue 24 (B*H = 64, L = 512, d_k = 64: H = 8 and so d = 512; and
# the end-to-end case's H = 1, d = 64, L = 256), on 1 and 2 threads. REPEAT bench runs per row,
# interleaved across the rows (row 1, row 2, ..., row 1, ...) so that the host's noise hits all
# alike; each bench run takes the median of --repeats paired runs. The table gives medians over
# the REPEAT runs of the kernel's and the step's GFLOP/s (attention + projection FLOPs, as run's
# --report counts them), of their per-run ratio, and of the step's first run (its outputs in
# fresh memory, as each slot's first step of a run).
#
#   scripts/bench_projection_step.sh [--repeat N] [--bin PATH] [--dtype f32|f16]
#
#   --repeat N   bench runs per row [11]
#   --bin PATH   attnbatch binary [build/attnbatch]
#   --dtype D    --weights-dtype of the maps [f32]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
repeat=11 bin=$repo/build/attnbatch dtype=f32
while [ $# -gt 0 ]; do
    case $1 in
        --repeat) repeat=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --dtype) dtype=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench_projection_step.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $repeat =~ ^[1-9][0-9]*$ ]] || { echo "bench_projection_step.sh: --repeat needs a positive integer" >&2; exit 2; }
[ -x "$bin" ] || { echo "bench_projection_step.sh: $bin is not an executable; build it (scripts/build.sh) or give --bin" >&2; exit 2; }
python=/usr/bin/python3

rows=(
    "B*H=64 L=512 d_k=64 (H=8, d=512)|--batch 8 --heads 8 --seq-len 512 --head-dim 64"
    "end-to-end shape (H=1, d=64, L=256)|--batch 128 --heads 1 --seq-len 256 --head-dim 64"
)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "bench_projection_step.sh: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before; $repeat runs per row"
for _ in $(seq "$repeat"); do
    i=0
    for row in "${rows[@]}"; do
        for threads in 1 2; do
            i=$((i + 1))
            # shellcheck disable=SC2086  # the shape's options, one word each
            "$bin" bench ${row#*|} --threads "$threads" --projections --save-weights all --weights-dtype "$dtype" \
                --repeats 5 --json >>"$out/$i.json"
        done
    done
done
echo "| shape | threads | kernel alone GFLOP/s | with projections + all maps GFLOP/s | ratio | first step GFLOP/s |"
echo "| --- | --- | --- | --- | --- | --- |"
i=0
for row in "${rows[@]}"; do
    for threads in 1 2; do
        i=$((i + 1))
        "$python" - "$out/$i.json" "${row%%|*}" "$threads" <<'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
m = lambda key: statistics.median(r[key] for r in runs)
print("| %s | %s | %.1f | %.1f | %.3f | %.1f |" % (sys.argv[2], sys.argv[3], m("plain_gflops"), m("gflops"),
                                                m("ratio_to_plain"), m("first_step_gflops")))
EOF
    done
done
echo "bench_projection_step.sh: load average $(cut -d' ' -f1-3 /proc/loadavg) after"
