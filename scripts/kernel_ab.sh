#!/usr/bin/env bash
# Same-process A/B of the attention kernels: the kernels of BASE (a git revision, or a directory
# holding src/kernels and include) and of this working tree, built into one program
# (scripts/kernel_ab/), called in alternation on the same inputs, every configuration in every
# round; medians of the rounds' paired ratios. For changes of 1-3%, which separate processes
# on a shared host cannot resolve (scripts/bench_kernel.sh with BASE= compares whole `bench`
# runs instead). Run it with BASE = HEAD first: the ratios it prints for identical code are the
# sitting's noise. Last, each side runs every configuration once more into outputs of its own,
# and the script says whether the new side's output and lse match the base's bit for bit (or how
# many values differ, and by how much at most).
#   scripts/kernel_ab.sh [--rounds N] [--threads T] [--seq-len L] [--groups G] [--new DIR] BASE
#   --rounds N    rounds, each running every configuration on both sides (21)
#   --threads T   OpenMP threads per call (1); one thread runs pinned to the first allowed CPU
#   --seq-len L   sequence length (512)
#   --groups G    sequence-head pairs of L x 64 each (64: 8 MiB per tensor, the B*H = 64 of
#                 scripts/bench_precision.sh)
#   --new DIR     the new side from DIR (src/kernels and include) instead of the working tree
# Each side's whole kernel library (every src/kernels/*.cpp of its tree) is compiled with the
# flags its own src/kernels/CMakeLists.txt gives each file, and with functions 64-byte aligned:
# unaligned, two copies of the same code have differed by up to 8% here.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=21 threads=1 len=512 groups=64 base='' new_tree=$PWD
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
while (( $# )); do
  [[ $1 != --* || $1 == --help || $# -ge 2 ]] || { echo "kernel_ab.sh: $1 needs a value (see --help)" >&2; exit 2; }
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --seq-len) len=$2; shift 2 ;;
    --groups) groups=$2; shift 2 ;;
    --new) [[ -d $2/src/kernels && -d $2/include ]] || { echo "kernel_ab.sh: --new '$2' is not a directory with src/kernels and include" >&2; exit 2; }
           new_tree=$(cd "$2" && pwd); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "kernel_ab.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [[ -z $base ]] || { echo "kernel_ab.sh: one BASE expected, got '$base' and '$1'" >&2; exit 2; }
       base=$1; shift ;;
  esac
done
[[ -n $base ]] || { echo "kernel_ab.sh: BASE missing: a git revision or a directory with src/kernels and include" >&2; exit 2; }
for value in "$rounds" "$threads" "$len" "$groups"; do
  [[ $value =~ ^[1-9][0-9]*$ ]] || { echo "kernel_ab.sh: '$value' is not a positive integer" >&2; exit 2; }
done
grep -qw avx512f /proc/cpuinfo || grep -qw avx2 /proc/cpuinfo ||
  { echo "kernel_ab.sh: this CPU has neither AVX-512 nor AVX2, the kernels it compares" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ -d $base/src/kernels && -d $base/include ]]; then
  base_tree=$(cd "$base" && pwd)
else
  git rev-parse --verify --quiet "$base^{commit}" >/dev/null ||
    { echo "kernel_ab.sh: '$base' is neither a git revision nor a directory with src/kernels and include" >&2; exit 2; }
  base_tree=$work/base
  mkdir -p "$base_tree"
  git archive "$base" src/kernels include | tar -x -C "$base_tree"
fi

common=(-O3 -falign-functions=64 -std=c++17 -fopenmp -DNDEBUG -I scripts/kernel_ab)
# The options TREE's src/kernels/CMakeLists.txt gives FILE of its kernel library: the options
# of its attnbatch_kernel_backend() calls and the definitions it sets on single sources (each
# side's own, so a revision that changed them is built as it was).
file_flags() {
  /usr/bin/python3 - "$1/src/kernels/CMakeLists.txt" "$(basename "$2")" <<'PY'
import re, sys
text = re.sub(r"#[^\n]*", "", open(sys.argv[1]).read())
name = sys.argv[2]
shared = re.search(r"set\(options\s+([^)]*?)\$\{ARGN\}\)", text)
for call in re.finditer(r"attnbatch_kernel_backend\(\s*([^\s)]+)([^)]*)\)", text):
    if call.group(1) == name:
        print("\n".join((shared.group(1).split() if shared else []) + call.group(2).split()))
for d in re.finditer(r"set_property\(SOURCE\s+([^\s)]+)\s+APPEND\s+PROPERTY\s+COMPILE_DEFINITIONS\s+([^)]*)\)", text):
    if d.group(1) == name:
        print("\n".join("-D" + x for x in d.group(2).split()))
PY
}
# Up to one compile per core at a time; any that fails fails the build.
objects=() compiled=yes cores=$(nproc)
for side in base new; do
  tree=$new_tree
  [[ $side == base ]] && tree=$base_tree
  flags=("${common[@]}" "-Dattnbatch=attnbatch_$side" -I "$tree/include" -I "$tree/src/kernels")
  for source in "$tree"/src/kernels/*.cpp scripts/kernel_ab/side.cpp; do
    object=$work/${side}_$(basename "$source" .cpp).o
    extra=()
    [[ $source == "$tree"/* ]] && mapfile -t extra < <(file_flags "$tree" "$source")
    while (( $(jobs -rp | wc -l) >= cores )); do wait -n || compiled=no; done
    g++ "${flags[@]}" "${extra[@]}" "-DAB_SIDE=$side" -c "$source" -o "$object" &
    objects+=("$object")
  done
done
while (( $(jobs -rp | wc -l) > 0 )); do wait -n || compiled=no; done
[[ $compiled == yes ]] || { echo "kernel_ab.sh: a side did not compile (the compiler's messages are above)" >&2; exit 1; }
g++ "${common[@]}" scripts/kernel_ab/driver.cpp "${objects[@]}" -o "$work/kernel_ab"
new_name="the working tree of $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
[[ $new_tree == "$PWD" ]] || new_name=$new_tree
echo "base: $base; new: $new_name"
pin=()
if (( threads == 1 )); then pin=(taskset -c "$(taskset -cp $$ | sed 's/.*: //; s/[,-].*//')"); fi
"${pin[@]}" "$work/kernel_ab" "$rounds" "$threads" "$len" "$groups"
