#!/usr/bin/env bash
# The kernel's figures for both precisions (README "Kernel: fp32 and bf16"): every configuration
# below run ROUNDS times as separate processes, interleaved (one round runs each configuration
# once, so all see the same neighbours on a shared machine), medians reported, then the ratios
# the kernel is held to: 2 threads against 1, causal against full, bf16 against fp32.
#   scripts/bench_precision.sh [ROUNDS]        (default 11)   BIN=build/attnbatch by default
# Columns: GFLOP/s, fraction of the measured fp32 FMA peak (per thread), on_cpu (the share of
# the run the process's threads were on a core: below 1, other processes took the rest), the
# GFLOP/s and fraction per second on a core (each run over its on_cpu share: what time slicing
# by other processes leaves alone), and for bf16 the max abs error and NMSE of 4 sequence-head
# pairs against the fp64 reference. Ratios are given both ways.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-11}
bin=${BIN:-build/attnbatch}
shape="--batch 8 --heads 8 --seq-len 512 --dim 64"
long="--batch 1 --heads 8 --seq-len 4096 --dim 64 --repeats 3"
configs=(
  "fp32_1t|$shape --threads 1"
  "fp32_2t|$shape --threads 2"
  "fp32_1t_causal|$shape --threads 1 --causal"
  "fp32_2t_causal|$shape --threads 2 --causal"
  "fp32_long_1t|$long --threads 1"
  "fp32_long_2t|$long --threads 2"
  "bf16_1t|$shape --threads 1 --precision bf16 --check"
  "bf16_2t|$shape --threads 2 --precision bf16 --check"
  "bf16_1t_causal|$shape --threads 1 --precision bf16 --causal --check"
  "bf16_2t_causal|$shape --threads 2 --precision bf16 --causal --check"
)
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
for round in $(seq "$rounds"); do
  for entry in "${configs[@]}"; do
    name=${entry%%|*}
    # shellcheck disable=SC2086  # the configuration is a list of options
    if out=$("$bin" bench ${entry#*|} --json 2>&1); then
      printf '%s %s\n' "$name" "$out" >>"$raw"
    else
      printf '%s: %s\n' "$name" "$out" >&2  # e.g. no bf16 arithmetic on this CPU
    fi
  done
  printf 'round %d of %d\n' "$round" "$rounds" >&2
done
/usr/bin/python3 - "$raw" <<'EOF'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, text = line.split(" ", 1)
    runs.setdefault(name, []).append(json.loads(text))
med = {name: {key: statistics.median(r[key] for r in rs if key in r) for key in rs[0] if isinstance(rs[0][key], (int, float)) and not isinstance(rs[0][key], bool)} for name, rs in runs.items()}
print("| configuration | runs | GFLOP/s | fraction of peak | on_cpu | GFLOP/s on CPU | fraction on CPU | max abs error | NMSE |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for name, m in med.items():
    err = ("%.2e | %.2e" % (m["max_abs_error"], m["nmse"])) if "nmse" in m else "- | -"
    print("| %s | %d | %.1f | %.3f | %.2f | %.1f | %.3f | %s |" % (name, len(runs[name]), m["gflops"], m["fraction_of_peak"],
                                                       m["on_cpu"], m["gflops_on_cpu"], m["fraction_on_cpu"], err))
def ratio(a, b, label):
    if a in med and b in med:
        print("%-44s %5.2f  (on CPU: %.2f)" % (label, med[a]["gflops"] / med[b]["gflops"],
                                                med[a]["gflops_on_cpu"] / med[b]["gflops_on_cpu"]))
print()
ratio("fp32_2t", "fp32_1t", "fp32 2 threads / 1 thread")
ratio("fp32_1t_causal", "fp32_1t", "fp32 causal / full, 1 thread")
ratio("fp32_2t_causal", "fp32_2t", "fp32 causal / full, 2 threads")
ratio("fp32_long_2t", "fp32_long_1t", "fp32 B*H=8 L=4096, 2 threads / 1 thread")
ratio("bf16_1t", "fp32_1t", "bf16 / fp32, 1 thread")
ratio("bf16_2t", "fp32_2t", "bf16 / fp32, 2 threads")
ratio("bf16_1t_causal", "fp32_1t_causal", "bf16 / fp32, causal, 1 thread")
ratio("bf16_2t_causal", "fp32_2t_causal", "bf16 / fp32, causal, 2 threads")
EOF
