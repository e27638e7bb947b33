#!/usr/bin/env bash
# Builds the libFuzzer targets (ATTNBATCH_FUZZ=ON, clang, ASan + UBSan) into build-fuzz/ and
# runs each for S seconds, then prints per target: executions, exec/s, corpus size, coverage
# and crashes, each new reproducer triaged as failing in libhdf5 or in attnbatch. Installs
# Debian's clang and compiler-rt when missing.
#
#   scripts/fuzz.sh [--seconds S] [--target fuzz_options|fuzz_input]   (default: 300 s each, both)
#
# Seeds: fuzz/corpus/{options,input}, checked in (fuzz/make_seeds.py made them, with
# `attnbatch generate` and h5py). The growing corpus, logs and any crash, leak,
# timeout or oom reproducer stay in build-fuzz/fuzz-work/<target>/; replay one with
#   build-fuzz/fuzz/<target> build-fuzz/fuzz-work/<target>/artifacts/crash-...
# Builds and fuzzing run under `nice -n 10` (the machine is shared).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

seconds=300
targets=(fuzz_options fuzz_input)
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --target) targets=("$2"); shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for t in "${targets[@]}"; do
  case "$t" in fuzz_options|fuzz_input) ;; *) echo "fuzz.sh: unknown target '$t'" >&2; exit 2 ;; esac
done

# clang and libFuzzer's runtime (compiler-rt), only for this script.
missing=()
for p in clang libclang-rt-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "fuzz.sh: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}"
fi

build=$root/build-fuzz
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTNBATCH_FUZZ=ON \
  -DATTNBATCH_TESTS=OFF -DATTNBATCH_OPENMP=OFF >/dev/null
nice -n 10 cmake --build "$build" -j2 --target "${targets[@]}"

work=$build/fuzz-work

# libhdf5 mallocs sizes read from the file (a 4 GB or 2^63-byte local heap, say) before it
# finds them beyond the end: as without ASan, a malloc too big returns NULL, libFuzzer's
# malloc limit is lifted, and -rss_limit_mb still catches memory really used.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/fuzz/lsan.supp}
declare -A max_len=([fuzz_options]=2048 [fuzz_input]=32768)
declare -A dict=([fuzz_options]=fuzz/options.dict [fuzz_input]=fuzz/input.dict)
declare -A seed_dir=([fuzz_options]=options [fuzz_input]=input)

# Where a reproducer fails: the first stack frame that is not the sanitizers', libFuzzer's,
# libc's or libstdc++'s, as "in libhdf5", "in Boost" or "in attnbatch", with the error line.
triage() {
  local out frame what where=attnbatch
  out=$(timeout 120 "$1" -malloc_limit_mb=1000000 -timeout=10 "$2" 2>&1 || true)
  frame=$(grep -E '^ +#[0-9]+ ' <<<"$out" |
    grep -vE 'sanitizer|fuzzer::|__asan|interceptor|libc\.so|libstdc\+\+|/libc/|sysdeps|malloc|mem(cpy|move|set)' | head -1)
  what=$(grep -E '^(==[0-9]+== ?ERROR|.*runtime error|fuzz_[a-z]+ finding)' <<<"$out" | head -1 | cut -c1-150)
  grep -q libhdf5 <<<"$frame" && where=libhdf5
  grep -q libboost <<<"$frame" && where=Boost
  echo "in $where: ${what:-?} at $(sed -E 's/^ +#[0-9]+ 0x[0-9a-f]+ in //; s/\(.*//' <<<"$frame" | cut -c1-100)"
}

summary=()
for t in "${targets[@]}"; do
  dir=$work/$t
  mkdir -p "$dir/corpus" "$dir/artifacts" "$dir/scratch"
  log=$dir/fuzz.log
  echo "fuzz.sh: $t for ${seconds}s (log: $log)"
  # One forked worker: a crash, leak, timeout or oom is saved and fuzzing goes on. The scratch
  # directory is the working directory: nothing a fuzzed option names is ours.
  before=$(find "$dir/artifacts" -type f | wc -l)
  touch "$dir/.start"
  (cd "$dir/scratch" && nice -n 10 "$build/fuzz/$t" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
      -max_total_time="$seconds" -max_len="${max_len[$t]}" -dict="$root/${dict[$t]}" -timeout=25 -rss_limit_mb=2048 \
      -malloc_limit_mb=1000000 -artifact_prefix="$dir/artifacts/" "$dir/corpus" "$root/fuzz/corpus/${seed_dir[$t]}") \
      >"$log" 2>&1 || true
  # Crashed workers leave their /dev/shm scratch file (named by pid) behind.
  for f in /dev/shm/attnbatch-fuzz-*; do
    pid=${f##*-}; pid=${pid%%.*}
    [ -e "$f" ] && ! kill -0 "$pid" 2>/dev/null && rm -f "$f"
  done
  # Fork mode's status lines: "#EXECS: cov: C ft: F corp: N exec/s E oom/timeout/crash: O/T/C time: S job: J".
  last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -1 || true)
  field() { sed -n "s|.*$1 \([0-9/]*\).*|\1|p" <<<"$last"; }
  execs=$(sed -n 's/^#\([0-9]*\):.*/\1/p' <<<"$last")
  new=$(( $(find "$dir/artifacts" -type f | wc -l) - before ))
  summary+=("$(printf '%-13s executions %-8s exec/s %-5s corpus %-5s (%s saved) cov %-5s ft %-5s oom/timeout/crash %-7s new reproducers %s' \
    "$t" "${execs:-?}" "$(field 'exec/s')" "$(field 'corp:')" "$(find "$dir/corpus" -type f | wc -l)" "$(field 'cov:')" \
    "$(field 'ft:')" "$(field 'oom/timeout/crash:')" "$new")")
  find "$dir/artifacts" -type f -newer "$dir/.start" | head -20 | while read -r a; do
    summary_line=$(triage "$build/fuzz/$t" "$a")
    echo "    $(basename "$a"): $summary_line"
  done
done
echo
echo "fuzz.sh: results (${seconds}s per target)"
printf '%s\n' "${summary[@]}"
