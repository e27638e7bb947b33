#!/usr/bin/env bash
# bench_projection.sh - does a BLAS pay for the projection GEMMs? Times the project's
# kernels::project (own micro-kernel, weights packed once, bias in the epilogue) against
# Debian's OpenBLAS (bias rows + cblas_sgemm with beta = 1) on the same inputs: 4096 tokens
# (16 sequences x 256) times W of the engine's shapes (d 64, 512, 768; Q/K/V/w_o and fused
# QKV), with 1 and 2 threads. Repetitions are interleaved in one process (A B, B A, ...); the
# table gives median GFLOP/s of each, their ratio own/OpenBLAS (> 1: own is faster), the
# median of the per-pair ratios (sturdier when the load changes) and the min-max spread. Then
# determinism (each run twice, and 1 vs 2 threads: bit-identical yes/no) and accuracy (max
# |y - y_f64| against a double-precision reference) of both.
#
#   scripts/bench_projection.sh [--repeat N] [--quick] [--variant openmp|pthread|both]
#
# Options:
#   --repeat N      interleaved samples per shape and thread count [11; quick 5]
#   --quick         three shapes, shorter samples (about half a minute per variant)
#   --variant V     OpenBLAS threading build: openmp (shares the program's libgomp team, so
#                   OpenBLAS and the kernels' OpenMP threads never run side by side), pthread
#                   (OpenBLAS's own thread pool next to libgomp's) or both [both]
#   --build DIR     CMake build directory for the attnbatch_kernels library [build-bench]
#
# Installs libopenblas-dev and the chosen variants' -dev packages with apt-get when missing
# (only for this script: the normal build and scripts/install-deps.sh do not use OpenBLAS).
# The benchmark is scripts/bench_projection/bench_projection.cpp, compiled with g++ -O3
# -march=native -fopenmp against build-bench/src/kernels/libattnbatch_kernels.a, once per
# variant, each with an rpath to that variant's libopenblas.
# Debian 12's OpenBLAS 0.3.21 (DYNAMIC_ARCH) falls back to its Prescott (SSE3) kernels on
# CPUs newer than it knows (e.g. Emerald Rapids, family 6 model 207; fixed upstream in
# 0.3.25), so unless OPENBLAS_CORETYPE is set the script sets it from /proc/cpuinfo:
# Cooperlake (AVX-512 + BF16), SkylakeX (AVX-512) or Haswell (AVX2 + FMA). The table header
# shows the core OpenBLAS runs and the one it would have picked by itself.
# Builds run under `nice -n 10` (the machine is shared); the benchmark itself does not.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

repeat="" quick=0 variant=both build=$repo/build-bench
while [ $# -gt 0 ]; do
    case $1 in
        --repeat) repeat=$2; shift 2 ;;
        --quick) quick=1; shift ;;
        --variant) variant=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench_projection.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case $variant in
    openmp|pthread) variants=("$variant") ;;
    both) variants=(openmp pthread) ;;
    *) echo "bench_projection.sh: --variant must be openmp, pthread or both" >&2; exit 2 ;;
esac
if [ -z "$repeat" ]; then
    repeat=11
    [ $quick = 1 ] && repeat=5
fi
[[ $repeat =~ ^[1-9][0-9]*$ ]] || { echo "bench_projection.sh: --repeat needs a positive integer" >&2; exit 2; }

# OpenBLAS, only for this script.
missing=()
packages=(libopenblas-dev)
for v in "${variants[@]}"; do packages+=("libopenblas-$v-dev"); done
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "bench_projection.sh: installing ${missing[*]}"
    sudo_cmd=()
    [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
    export DEBIAN_FRONTEND=noninteractive
    "${sudo_cmd[@]}" apt-get update -qq
    "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}"
fi

# The kernels library only: no MPI, HDF5 or test targets are built.
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DATTNBATCH_TESTS=OFF >/dev/null
nice -n 10 cmake --build "$build" -j2 --target attnbatch_kernels >/dev/null
lib=$build/src/kernels/libattnbatch_kernels.a
multiarch=$(gcc -print-multiarch)
mkdir -p "$build/bench_projection"
for v in "${variants[@]}"; do
    libdir=/usr/lib/$multiarch/openblas-$v
    nice -n 10 g++ -std=c++17 -O3 -march=native -fopenmp -Wall -Wextra -I"$repo/include" \
        -I"/usr/include/$multiarch/openblas-$v" "$repo/scripts/bench_projection/bench_projection.cpp" "$lib" \
        -L"$libdir" -Wl,-rpath,"$libdir" -lopenblas -o "$build/bench_projection/bench_projection_$v"
done

if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    # The core types this CPU runs, as the peer benchmarks list them; the newest family here.
    # shellcheck source=scripts/openblas_peer.sh
    source "$repo/scripts/openblas_peer.sh"
    case ",$(openblas_coretypes)," in
        *,Cooperlake,*) export OPENBLAS_CORETYPE=Cooperlake ;;
        *,SkylakeX,*) export OPENBLAS_CORETYPE=SkylakeX ;;
        *,Haswell,*) export OPENBLAS_CORETYPE=Haswell ;;
    esac
fi
args=(--repeat "$repeat")
[ $quick = 1 ] && args+=(--quick)
echo "bench_projection.sh: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before;" \
    "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; OMP_* from the environment: $(env | grep '^OMP_' | tr '\n' ' ')"
for v in "${variants[@]}"; do
    echo
    echo "=== OpenBLAS $v build ==="
    bin=$build/bench_projection/bench_projection_$v
    echo "OpenBLAS's own choice of core on this CPU: $(env -u OPENBLAS_CORETYPE "$bin" --core-only)"
    "$bin" "${args[@]}" --variant "$v"
done
echo
echo "bench_projection.sh: load average $(cut -d' ' -f1-3 /proc/loadavg) after"
