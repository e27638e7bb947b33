# shellcheck shell=bash
# The peers' BLAS at its fastest, for the benchmarks that compare attnbatch with numpy or
# PyTorch (bench_e2e.sh, bench_compare.sh) and the projection GEMMs with OpenBLAS
# (bench_projection.sh takes its core type from openblas_coretypes). Sourced, not run. On a fresh Debian, numpy's
# libblas.so.3 is the reference BLAS, and Debian's OpenBLAS 0.3.21 does not know a Zen 5 or a
# Sapphire Rapids and falls back to its SSE3 kernels unless OPENBLAS_CORETYPE names a core type;
# a user who cares picks the fastest one. So the peer runs with OpenBLAS's libblas.so.3 first in
# LD_LIBRARY_PATH, once per core type this CPU can run, without the machine's pinned
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (OpenBLAS then sizes its blocking from the CPU).
#   openblas_dir [DIR]      prints DIR, or the directory of OpenBLAS's libblas.so.3 (installing
#                           libopenblas0-pthread with apt-get when it is missing and this runs as
#                           root); fails with a message naming what to install
#   openblas_coretypes      prints the OPENBLAS_CORETYPE values this CPU runs, comma-separated,
#                           fastest families first: SkylakeX and (with AVX512-BF16) Cooperlake,
#                           then Haswell and Zen with AVX2; Prescott when it has neither
#   peer_env                an array: `env` without the pinned OPENBLAS_* values, to prefix the
#                           peer's command with

# Used by the scripts that source this one:
# shellcheck disable=SC2034
peer_env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)

openblas_find() {
  local candidate
  for candidate in /usr/lib/*/openblas-pthread; do
    [[ -f $candidate/libblas.so.3 ]] && { echo "$candidate"; return; }
  done
  return 0  # nothing found is an empty answer, not a failure that set -e would exit on
}

openblas_dir() {
  local script dir=${1:-}
  script=$(basename "$0")
  if [[ -z $dir ]]; then
    dir=$(openblas_find)
    if [[ -z $dir && $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
      echo "$script: installing libopenblas0-pthread (the peer's BLAS at its fastest)" >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libopenblas0-pthread >&2 ||
        { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libopenblas0-pthread >&2; }
      dir=$(openblas_find)
    fi
  fi
  [[ -n $dir && -f $dir/libblas.so.3 ]] ||
    { echo "$script: no OpenBLAS libblas.so.3 found${dir:+ in $dir}; apt-get install libopenblas0-pthread, or give --openblas DIR" >&2; return 2; }
  echo "$dir"
}

openblas_coretypes() {
  # The flags padded with spaces, so that " flag " matches whole names only. (No helper
  # function: bash would define it globally, in every script that sources this one.)
  local flags list=()
  flags=" $(grep -m1 '^flags' /proc/cpuinfo) "
  if [[ $flags == *" avx512f "* && $flags == *" avx512bw "* && $flags == *" avx512vl "* ]]; then
    list+=(SkylakeX)
    [[ $flags == *" avx512_bf16 "* ]] && list+=(Cooperlake)
  fi
  [[ $flags == *" avx2 "* && $flags == *" fma "* ]] && list+=(Haswell Zen)
  [[ ${#list[@]} -gt 0 ]] || list=(Prescott)
  (IFS=,; echo "${list[*]}")
}
