#!/usr/bin/env bash
# bench_compare.sh - the attention kernel against numpy and PyTorch on one core, same shape,
# same sitting. Each round runs, one after the other (so that the machine's noise hits all
# three alike):
#   attnbatch bench --batch B --heads H --seq-len L --head-dim D --threads 1 --json
#   numpy:   softmax(Q K^T / sqrt(d)) V as batched matmuls over B*H float32 [L, d] slices
#   PyTorch: its fused torch.nn.functional.scaled_dot_product_attention where it has one (2.0
#            and later), else the same expression with torch.matmul / torch.softmax (Debian
#            12's 1.13); torch.set_num_threads(1)
# each timing the median of its own in-process repeats; the table shows the medians over the
# rounds, in attention GFLOP/s (4*B*H*L^2*d per pass, the count `bench` uses) and as a
# fraction of the single-core FMA peak that `bench` measures on the spot.
# OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS are 1 for all three.
# numpy and PyTorch run at their fastest: both do their matrix products in the BLAS, so each
# runs once per OpenBLAS core type this CPU can run, with OpenBLAS's libblas.so.3 first and the
# machine's pinned OPENBLAS_* values unset (scripts/openblas_peer.sh says why); the table gives
# every core type's median and compares attnbatch with each tool's fastest.
#
#   scripts/bench_compare.sh [options]
#
# Options:
#   --rounds R       rounds (separate processes for each tool) [5]
#   --batch B        sequences [8]     --heads H   heads [8]
#   --seq-len L      tokens [512]      --dim D     features per head [64]
#   --no-torch       skip PyTorch
#   --no-install     do not install python3-torch when it is missing (skip PyTorch instead)
#   --openblas DIR   OpenBLAS's libblas.so.3 directory (found under /usr/lib/*/openblas-pthread;
#                    installed with apt-get install libopenblas0-pthread when missing, as root)
#   --coretypes LIST OPENBLAS_CORETYPE values to try (those this CPU runs)
#   --installed-blas also run both with the BLAS and environment as they are (on a fresh
#                    Debian the reference BLAS: what a user who changed nothing gets)
#   --bin PATH       the attnbatch binary [$ATTNBATCH, else build/attnbatch]
#   -h, --help       this text
#
# PyTorch is Debian's python3-torch; when it is missing this script installs it with apt-get
# (as root, or through sudo). It is used by this script only: neither the build nor
# scripts/install-deps.sh needs it.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=/usr/bin/python3   # Debian's python, with numpy (and python3-torch once installed)

rounds=5 batch=8 heads=8 seq_len=512 dim=64 torch=1 install=1 openblas="" coretypes="" installed_blas=0
bin=${ATTNBATCH:-$repo/build/attnbatch}
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --batch) batch=$2; shift 2 ;;
        --heads) heads=$2; shift 2 ;;
        --seq-len) seq_len=$2; shift 2 ;;
        --dim) dim=$2; shift 2 ;;
        --no-torch) torch=0; shift ;;
        --no-install) install=0; shift ;;
        --bin) bin=$2; shift 2 ;;
        --openblas) openblas=$2; shift 2 ;;
        --coretypes) coretypes=$2; shift 2 ;;
        --installed-blas) installed_blas=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench_compare.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -x "$bin" ] || { echo "bench_compare.sh: $bin is not executable (scripts/build.sh builds it, or pass --bin)" >&2; exit 2; }
"$PY" -c 'import numpy' 2>/dev/null || { echo "bench_compare.sh: $PY has no numpy (apt-get install python3-numpy)" >&2; exit 2; }

if [ $torch = 1 ] && ! "$PY" -c 'import torch' 2>/dev/null; then
    if [ $install = 1 ]; then
        echo "bench_compare.sh: installing Debian's python3-torch (for this comparison only)" >&2
        sudo_cmd=()
        [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
        "${sudo_cmd[@]}" apt-get update -qq
        DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
            -o DPkg::Lock::Timeout=600 python3-torch >/dev/null
    else
        echo "bench_compare.sh: python3-torch is not installed; PyTorch skipped" >&2
        torch=0
    fi
fi
[ $torch = 1 ] && "$PY" -c 'import torch, torch.nn.functional as F
print("bench_compare.sh: PyTorch %s: %s" % (torch.__version__, "its fused scaled_dot_product_attention"
      if hasattr(F, "scaled_dot_product_attention") else "matmul and softmax (no fused attention before 2.0)"))' >&2

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
# shellcheck source=scripts/openblas_peer.sh
source "$repo/scripts/openblas_peer.sh"
openblas=$(openblas_dir "$openblas") || exit 2
[ -n "$coretypes" ] || coretypes=$(openblas_coretypes)
IFS=, read -r -a blas_ways <<<"$coretypes"
[ $installed_blas = 1 ] && blas_ways+=(installed)

# One timing of the Python expression under one BLAS way (a core type, or "installed"): prints
# "TOOL/WAY GFLOPS" (median of in-process repeats).
python_bench() {
    local launch=()
    [ "$2" = installed ] || launch=("${peer_env[@]}" LD_LIBRARY_PATH="$openblas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
                                    OPENBLAS_CORETYPE="$2")
    "${launch[@]}" "$PY" - "$1/$2" "$batch" "$heads" "$seq_len" "$dim" <<'EOF'
import statistics, sys, time
import numpy as np
tool, B, H, L, D = sys.argv[1], *map(int, sys.argv[2:6])
flops = 4.0 * B * H * L * L * D
rng = np.random.default_rng(1)
q, k, v = (rng.standard_normal((B * H, L, D), dtype=np.float32) for _ in range(3))
scale = np.float32(1.0 / np.sqrt(D))
if tool.startswith("numpy/"):
    def attention():
        s = np.matmul(q, k.transpose(0, 2, 1)) * scale
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        return np.matmul(s, v)
else:
    import torch
    torch.set_num_threads(1)
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    fused = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    def attention():
        with torch.inference_mode():
            if fused is not None:
                return fused(tq, tk, tv)  # its default scale is 1/sqrt(d), as here
            return torch.matmul(torch.softmax(torch.matmul(tq, tk.transpose(1, 2)) * scale, dim=-1), tv)
attention()  # warm-up
times = []
for _ in range(7):
    t0 = time.perf_counter()
    attention()
    times.append(time.perf_counter() - t0)
print(tool, flops / statistics.median(times) / 1e9)
EOF
}

tools=(attnbatch numpy)
[ $torch = 1 ] && tools+=(pytorch)
results=$(mktemp)
trap 'rm -f "$results"' EXIT
echo "bench_compare: B=$batch H=$heads L=$seq_len d=$dim float32, 1 thread, $rounds rounds of ${tools[*]};" \
     "numpy and PyTorch with OpenBLAS ($openblas) as ${blas_ways[*]}" >&2
for r in $(seq "$rounds"); do
    "$bin" bench --batch "$batch" --heads "$heads" --seq-len "$seq_len" --head-dim "$dim" --threads 1 --json \
        | "$PY" -c 'import json, sys; j = json.load(sys.stdin); print("attnbatch", j["gflops"], j["peak_gflops_per_core"], j["fraction_of_peak"])' \
        >>"$results"
    for way in "${blas_ways[@]}"; do
        python_bench numpy "$way" >>"$results"
        [ $torch = 1 ] && python_bench pytorch "$way" >>"$results"
    done
    echo "bench_compare: round $r of $rounds done" >&2
done

"$PY" - "$results" "$batch" "$heads" "$seq_len" "$dim" <<'EOF'
import statistics, sys
runs = {}
peaks, fractions = [], []
for line in open(sys.argv[1]):
    f = line.split()
    runs.setdefault(f[0], []).append(float(f[1]))
    if f[0] == "attnbatch":
        peaks.append(float(f[2]))
        fractions.append(float(f[3]))
peak = statistics.median(peaks)
ours = statistics.median(runs["attnbatch"])
print("B=%s H=%s L=%s d=%s float32, one thread; single-core FMA peak %.1f GFLOP/s (median of bench's)" % (*sys.argv[2:6], peak))
print("%-22s %9s %9s %10s %9s" % ("tool / BLAS", "GFLOP/s", "of peak", "attnbatch", "rounds"))
fastest = {}
for tool, vals in runs.items():
    g = statistics.median(vals)
    # attnbatch's own fraction is the median of its paired ratios (see `attnbatch bench --help`)
    frac = statistics.median(fractions) if tool == "attnbatch" else g / peak
    print("%-22s %9.1f %9.2f %9.1fx %9d" % (tool, g, frac, ours / g, len(vals)))
    name = tool.split("/")[0]
    if tool != "attnbatch" and g > fastest.get(name, ("", 0.0))[1]:
        fastest[name] = (tool, g)
for name, (tool, g) in fastest.items():
    print("attnbatch against %s at its fastest (%s): %.1fx" % (name, tool, ours / g))
EOF
