#!/usr/bin/env bash
# The kernel's figures of issue 24 at B*H = 64 (B = 8, H = 8), L = 512, d = 64: fp32, bf16 and
# fp32 causal on 1 and on 2 threads, each run ROUNDS times as a separate `attnbatch bench`
# process, interleaved (a round runs every configuration once, so all see the same neighbours on
# a shared machine), and the medians of the rounds:
#   fp32 fraction of the measured FMA peak, bf16 / fp32, causal / full (causal counted with half
#   the FLOPs, as bench does); then the bf16 NMSE against the fp64 reference over all 64 heads
#   beside its floor, the NMSE of attention in double on Q, K, V and P rounded to bf16.
#   scripts/bench_precision.sh [ROUNDS]        (default 11)   BIN=build/attnbatch by default
# Each figure twice: from wall time (what bench reports), and per second on a core (each run's
# rate over the share of its wall time its threads were on a core, bench's on_cpu): on a busy
# host the second is the steadier. The load average before and after is printed with them.
# With BASE=path/to/other/attnbatch, that binary runs every configuration too, in the same rounds
# (BASE then BIN, or BIN then BASE, alternating by round), and its table is printed first, then
# the new binary's, then each of the new figures over the base's.
# The one-thread runs of a round are all pinned to one CPU (taskset; bench_cpus.sh says why),
# the allowed CPUs taking turns by round, and the ratios (bf16 / fp32, causal / full) are
# medians of the rounds' own ratios: each compares runs on one core in one round. Their lower and
# upper quartiles are printed too: how far the rounds spread around those medians.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-11}
bin=${BIN:-build/attnbatch}
base=${BASE:-}
shape="--batch 8 --heads 8 --seq-len 512 --head-dim 64"
configs=(
  "fp32 1|--threads 1"
  "bf16 1|--threads 1 --precision bf16"
  "causal 1|--threads 1 --causal"
  "fp32 2|--threads 2"
  "bf16 2|--threads 2 --precision bf16"
  "causal 2|--threads 2 --causal"
)
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# shellcheck source=scripts/bench_cpus.sh
source scripts/bench_cpus.sh
sides=("new|$bin")
[[ -n "$base" ]] && sides=("base|$base" "new|$bin")
for round in $(seq "$rounds"); do
  for entry in "${configs[@]}"; do
    read -r -a pin <<<"$(pin_for $((round - 1)) "${entry#*|}")"
    order=("${sides[@]}")
    if (( round % 2 == 0 && ${#sides[@]} == 2 )); then order=("${sides[1]}" "${sides[0]}"); fi
    for side in "${order[@]}"; do
      # shellcheck disable=SC2086  # the options are a list
      printf '%s|%s|%s|%s\n' "${side%%|*}" "${entry%%|*}" "${pin[2]:-}" "$("${pin[@]}" "${side#*|}" bench $shape ${entry#*|} --json)" >>"$raw"
    done
  done
  printf 'round %d of %d\n' "$round" "$rounds" >&2
done
# The accuracy does not change between runs (outputs are bit-identical): one checked run.
# shellcheck disable=SC2086
printf 'new|check||%s\n' "$("$bin" bench $shape --threads 2 --precision bf16 --repeats 1 --check 64 --json)" >>"$raw"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
/usr/bin/python3 - "$raw" "$rounds" "$load_before" "$load_after" <<'EOF'
import json, statistics, sys
path, rounds, load_before, load_after = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
runs, cpus = {}, {}  # cpus: side -> name -> the CPU each run was pinned to ('' for none)
for line in open(path):
    side, name, cpu, text = line.split("|", 3)
    runs.setdefault(side, {}).setdefault(name, []).append(json.loads(text))
    cpus.setdefault(side, {}).setdefault(name, []).append(cpu)
def med(side, name, key):
    return statistics.median(r[key] for r in runs[side][name])
def round_ratios(side, over, under, key, cpu=None):
    """The rounds' own ratios (round i's `over` run over its `under` run), on `cpu` only if given."""
    pairs = zip(runs[side][over], runs[side][under], cpus[side][over])
    return [a[key] / b[key] for a, b, c in pairs if cpu is None or c == cpu]
def ratio(side, over, under, key, cpu=None):
    return statistics.median(round_ratios(side, over, under, key, cpu))
def quartiles(side, over, under):
    values = round_ratios(side, over, under, "gflops")
    if len(values) < 2:
        return "-"
    low, _, high = statistics.quantiles(values, n=4)
    return "%.3f-%.3f" % (low, high)
def figures(side):
    out = {}
    for basis, rate, fraction in (("wall time", "gflops", "fraction_of_peak"), ("on a core", "gflops_on_cpu", "fraction_on_cpu")):
        for t in ("1", "2"):
            fp32, bf16, causal = med(side, "fp32 " + t, rate), med(side, "bf16 " + t, rate), med(side, "causal " + t, rate)
            out[(t, basis)] = (fp32, med(side, "fp32 " + t, fraction), bf16, ratio(side, "bf16 " + t, "fp32 " + t, rate),
                               causal, ratio(side, "causal " + t, "fp32 " + t, rate))
    return out
print("B*H = 64 (B = 8, H = 8), L = 512, d = 64; medians of %d interleaved rounds (ratios: medians of each round's "
      "own); one-thread runs pinned to CPUs %s by turns; load average %s before, %s after"
      % (rounds, ", ".join(sorted(set(cpus["new"]["fp32 1"]))), load_before, load_after))
tables = {side: figures(side) for side in runs}
for side in sorted(runs):  # base, then new
    print()
    if len(runs) > 1:
        print("%s:" % side)
    print("| threads | fp32 GFLOP/s | fp32 fraction of peak | bf16 GFLOP/s | bf16 / fp32 | causal GFLOP/s | causal / full |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for key, f in tables[side].items():
        print("| %s (%s) | %.1f | %.3f | %.1f | %.2f | %.1f | %.3f |" % (key + f))
    print()
    print("peak (bench's FMA burst, median): %.1f GFLOP/s per core; on_cpu medians: %s" % (
        med(side, "fp32 1", "peak_gflops_per_core"),
        ", ".join("%s %.2f" % (name, med(side, name, "on_cpu")) for name in runs[side] if name != "check")))
    # How far the rounds spread: a median a point or two from a bound is within these.
    print("the rounds' own ratios (wall time), lower to upper quartile: bf16 / fp32 %s on one thread, %s on two; "
          "causal / full %s and %s" % (quartiles(side, "bf16 1", "fp32 1"), quartiles(side, "bf16 2", "fp32 2"),
                                       quartiles(side, "causal 1", "fp32 1"), quartiles(side, "causal 2", "fp32 2")))
    for cpu in sorted(set(cpus[side]["fp32 1"])):
        print("one thread on CPU %s (%d rounds): fp32 %.1f GFLOP/s, bf16 / fp32 %.2f, causal / full %.3f" % (
            cpu, cpus[side]["fp32 1"].count(cpu),
            statistics.median(r["gflops"] for r, c in zip(runs[side]["fp32 1"], cpus[side]["fp32 1"]) if c == cpu),
            ratio(side, "bf16 1", "fp32 1", "gflops", cpu), ratio(side, "causal 1", "fp32 1", "gflops", cpu)))
if len(runs) > 1:
    print()
    print("new / base, of each figure's medians:")
    print("| threads | fp32 | bf16 | causal | bf16 / fp32 | causal / full |")
    print("| --- | --- | --- | --- | --- | --- |")
    for key in tables["new"]:
        n, b = tables["new"][key], tables["base"][key]
        print("| %s (%s) | %.3f | %.3f | %.3f | %.3f | %.3f |" % (key + (n[0] / b[0], n[2] / b[2], n[4] / b[4], n[3] / b[3], n[5] / b[5])))
check = runs["new"]["check"][0]
print()
if "nmse_floor" in check:
    print("bf16 NMSE against the fp64 reference over %d heads: %.4e; floor (Q, K, V and P rounded to bf16, "
          "all else in double): %.4e; ratio %.4f (bound 1.2)"
          % (check["checked_heads"], check["nmse"], check["nmse_floor"], check["nmse"] / check["nmse_floor"]))
else:  # a binary from before bench reported the floor
    print("bf16 NMSE against the fp64 reference over %d heads: %.4e (this binary reports no floor)"
          % (check["checked_heads"], check["nmse"]))
EOF
