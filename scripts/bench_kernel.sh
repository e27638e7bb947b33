#!/usr/bin/env bash
# The kernel benchmark matrix of the foundation issue: each configuration run REPEAT times as
# separate processes (the machine is shared and noisy), reporting the median of the runs'
# attention GFLOP/s and of their paired fraction of peak.
#   scripts/bench_kernel.sh [REPEAT]        (default 5)   BIN=build/attnbatch by default
# With BASE=path/to/other/attnbatch, an A/B comparison instead: BASE and BIN run interleaved
# (BASE BIN BASE BIN ...) REPEAT times per configuration, so both see the same neighbours, and
# the medians of both fractions of peak are printed with their ratio BIN/BASE.
# One-thread configurations run pinned (taskset; bench_cpus.sh says why), the allowed CPUs
# taking turns by repetition, an A/B pair on one CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=${1:-5}
bin=${BIN:-build/attnbatch}
base=${BASE:-}
# shellcheck source=scripts/bench_cpus.sh
source scripts/bench_cpus.sh
configs=(
  "--batch 8 --heads 8 --seq-len 512 --head-dim 64 --threads 1"
  "--batch 8 --heads 8 --seq-len 512 --head-dim 64 --threads 2"
  "--batch 8 --heads 8 --seq-len 512 --head-dim 64 --threads 1 --causal"
  "--batch 8 --heads 8 --seq-len 512 --head-dim 64 --threads 1 --save-weights"
  "--batch 8 --heads 8 --seq-len 512 --head-dim 64 --threads 1 --save-weights mean --weights-dtype f16"
  "--batch 8 --heads 8 --seq-len 2048 --head-dim 64 --threads 1 --repeats 3"
  "--batch 8 --heads 8 --seq-len 2048 --head-dim 64 --threads 1 --causal --repeats 3"
  "--batch 8 --heads 8 --seq-len 256 --head-dim 128 --threads 1"
  "--batch 8 --heads 8 --seq-len 512 --head-dim 64 --threads 1 --isa avx2"
)
if [[ -n "$base" ]]; then
  printf '%-84s %8s %8s %7s\n' configuration base new ratio
  for c in "${configs[@]}"; do
    for i in $(seq "$repeat"); do
      pin=$(pin_for "$i" "$c")
      # shellcheck disable=SC2086  # the pin and the configuration are lists of words
      printf 'A %s\n' "$($pin "$base" bench $c --json)"
      # shellcheck disable=SC2086
      printf 'B %s\n' "$($pin "$bin" bench $c --json)"
    done | /usr/bin/python3 -c '
import json, statistics, sys
runs = {"A": [], "B": []}
for line in sys.stdin:
    side, text = line.split(" ", 1)
    runs[side].append(json.loads(text)["fraction_of_peak"])
a, b = statistics.median(runs["A"]), statistics.median(runs["B"])
print("%-84s %8.3f %8.3f %7.3f" % (sys.argv[1], a, b, b / a if a > 0 else float("nan")))
' "$c"
  done
  exit 0
fi
printf '%-84s %9s %9s %8s\n' configuration GFLOP/s peak/core fraction
for c in "${configs[@]}"; do
  for i in $(seq "$repeat"); do
    # shellcheck disable=SC2086  # the pin and the configuration are lists of words
    $(pin_for "$i" "$c") "$bin" bench $c --json
  done | /usr/bin/python3 -c '
import json, statistics, sys
runs = [json.loads(line) for line in sys.stdin]
med = lambda k: statistics.median(r[k] for r in runs)
print("%-84s %9.1f %9.1f %8.3f" % (sys.argv[1], med("gflops"), med("peak_gflops_per_core"), med("fraction_of_peak")))
' "$c"
done
