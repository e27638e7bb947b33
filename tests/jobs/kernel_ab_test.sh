#!/usr/bin/env bash
# scripts/kernel_ab.sh builds both sides and runs them (kernel_ab_test.sh): against a copy of the
# source tree as BASE (a directory, so no git history is needed) whose lse differs from the tree's
# by a changed constant and whose outputs do not, one round of a small problem prints a row for
# each kernel the CPU runs with positive rates and a finite ratio, the ratios within each side,
# and for each kernel that the outputs are identical and the lse differ; a BASE that is
# neither a revision nor a tree is refused with exit 2 and a message naming it. Rates are not
# compared: one round on a shared host says nothing.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
base=$(mktemp -d)
trap 'rm -rf "$base"' EXIT
cp -r "$repo/src" "$repo/include" "$base/"
# ln 2 as the lse's last factor, one part in a million off: the lse move, no output does.
sed -i 's/constexpr double kLn2 = 0.6931471805599453;/constexpr double kLn2 = 0.6931478;/' "$base/src/kernels/blocked_attention.hpp"
grep -q 'kLn2 = 0.6931478;' "$base/src/kernels/blocked_attention.hpp" || { echo "FAIL: kLn2 not found to change"; exit 1; }
out=$(bash "$repo/scripts/kernel_ab.sh" --rounds 1 --groups 4 --seq-len 64 "$base" 2>&1)
rc=$?
echo "$out"
[[ $rc == 0 ]] || { echo "FAIL: kernel_ab.sh exited $rc"; exit 1; }
kernels=("fp32 full" "fp32 causal")
grep -qw avx512_bf16 /proc/cpuinfo && kernels+=("bf16 full" "bf16 causal")
for kernel in "${kernels[@]}"; do
  row=$(grep -F "| $kernel |" <<<"$out") || { echo "FAIL: no row for $kernel"; exit 1; }
  /usr/bin/python3 - "$row" <<'PY' || { echo "FAIL: bad row: $row"; exit 1; }
import math, sys
cells = [c.strip() for c in sys.argv[1].strip().strip('|').split('|')]
base, new, ratio = map(float, cells[1:4])
assert base > 0 and new > 0 and math.isfinite(ratio) and ratio > 0, cells
PY
  grep -qE "^$kernel, new against base: output identical; lse [1-9][0-9]* of 256 differ, largest by " <<<"$out" ||
    { echo "FAIL: no comparison for $kernel saying the outputs agree and the lse differ"; exit 1; }
done
for side in base new; do
  grep -Eq "^$side: causal / full [0-9.]+" <<<"$out" || { echo "FAIL: no ratios for $side"; exit 1; }
done
bad=$(bash "$repo/scripts/kernel_ab.sh" --rounds 1 /nonexistent/tree 2>&1)
rc=$?
[[ $rc == 2 && $bad == *"'/nonexistent/tree' is neither a git revision nor a directory"* ]] ||
  { echo "FAIL: a bad BASE gave exit $rc: $bad"; exit 1; }
echo "PASS"
