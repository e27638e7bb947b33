#!/usr/bin/env bash
# End to end against the limit and against the peer: whole `mpirun -np 2` wall time (1 thread
# per rank) of attnbatch and of the mpi4py + h5py + numpy peer script (attn_mpi_h5.py) on the
# same input, runs interleaved (attnbatch, peer per BLAS, attnbatch, ...) so that the host's
# noise hits all alike; medians of REPEAT. Next to each case, the limit this machine sets,
# from quantities the script measures in the same sitting:
#   start-up  attnbatch run on a tiny input under mpirun -np 2 (process start, MPI_Init,
#             HDF5, exit: what every run pays; `--version` starts no MPI, so it is no measure)
#   write     the bytes of attnbatch's output file over the page-cache write rate of two
#             writers (one per rank) into the same directory (dd from /dev/zero)
#   compute   the case's attention (and projection) GFLOP over two cores at the rate
#             `attnbatch bench` measures for that shape on one thread (keeping every weight
#             when the case writes them)
#   limit     start-up + max(write, compute): writing overlapped with compute, as the
#             issue defines it. On 2 cores both ranks compute, so the copy into the page
#             cache cannot hide behind compute; start-up + write + compute is printed too.
#   durable   start-up + max(write to disk, compute): attnbatch publishes OUTPUT only once
#             it is on the disk (fsync, then rename; the peer script does not sync), so the
#             disk's rate bounds it too: "write to disk" is the same two dd writers with
#             conv=fdatasync.
#
#   scripts/bench_e2e.sh --peers DIR [--repeat R] [--out DIR] [--cases LIST] [--bin PATH]
#                        [--openblas DIR] [--coretypes LIST]
#
#   --peers DIR      directory holding the peer scripts attn_mpi_h5.py and gen_input.py
#                    (required; or PEERS=DIR in the environment)
#   --repeat R       runs per tool and case, the median is printed (5)
#   --out DIR        scratch directory for inputs, outputs, logs and results (/tmp/attnbatch-bench-e2e);
#                    its file system is the one measured
#   --cases LIST     comma-separated subset of: plain, proj_weights, long_weights, large (all)
#   --bin PATH       attnbatch binary (build/attnbatch)
#   --openblas DIR   OpenBLAS's libblas.so.3 directory, put first in LD_LIBRARY_PATH for the
#                    forced-BLAS peer runs (found under /usr/lib/*/openblas-pthread)
#   --coretypes LIST OPENBLAS_CORETYPE values of the forced-BLAS peer runs (SkylakeX,Cooperlake)
#
# Cases (d = 64, float32):
#   plain         N=2048 L=256, output only
#   proj_weights  N=2048 L=256, projections (w_q, w_k, w_v of the input file), all weights written
#   long_weights  N=256 L=1024, all weights written
#   large         N=1024 L=1024, output only (start-up weighs less)
# The peer runs once with numpy's BLAS as installed (whatever libblas.so.3 the system's
# alternatives select) and once per forced core type (OpenBLAS with its AVX-512 kernels); the
# ratio is against the fastest peer. A report (run --report) of attnbatch's last run of each
# case is kept in OUT/report_CASE.json: its phase_seconds say where the time went.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  sed -n '/^#   scripts/,/^#   large/p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

peers=${PEERS:-} repeat=5 out=/tmp/attnbatch-bench-e2e cases=plain,proj_weights,long_weights,large
bin=$PWD/build/attnbatch openblas="" coretypes=SkylakeX,Cooperlake
while [[ $# -gt 0 ]]; do
  case $1 in
    --peers) peers=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --openblas) openblas=$2; shift 2 ;;
    --coretypes) coretypes=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bench_e2e.sh: unknown option $1" >&2; usage ;;
  esac
done
if [[ -z $peers ]]; then
  echo "bench_e2e.sh: the peer scripts' directory is required: --peers DIR or PEERS=DIR" >&2
  usage
fi
for script in attn_mpi_h5.py gen_input.py; do
  [[ -f $peers/$script ]] || { echo "bench_e2e.sh: $peers/$script not found; expected the peer scripts in --peers DIR" >&2; exit 2; }
done
[[ -x $bin ]] || { echo "bench_e2e.sh: $bin is not an executable; build it (scripts/build.sh) or give --bin" >&2; exit 2; }
if [[ -z $openblas ]]; then
  for candidate in /usr/lib/*/openblas-pthread; do
    [[ -f $candidate/libblas.so.3 ]] && openblas=$candidate && break
  done
fi
[[ -n $openblas && -f $openblas/libblas.so.3 ]] || { echo "bench_e2e.sh: no OpenBLAS libblas.so.3 found; give --openblas DIR" >&2; exit 2; }

python=/usr/bin/python3  # Debian's h5py, mpi4py and numpy belong to it
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"
out=$(cd "$out" && pwd)
mpi=(mpirun -np 2 --oversubscribe --bind-to none -x OPENBLAS_NUM_THREADS=1 -x OMP_NUM_THREADS=1)
IFS=, read -r -a coretype_list <<<"$coretypes"
IFS=, read -r -a case_list <<<"$cases"

# shellcheck source=scripts/bench_timing.sh
source scripts/bench_timing.sh

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# case -> "N L flags"
shape_of() {
  case $1 in
    plain|proj_weights) echo "2048 256" ;;
    long_weights) echo "256 1024" ;;
    large) echo "1024 1024" ;;
    *) echo "bench_e2e.sh: unknown case $1 (expected plain, proj_weights, long_weights, large)" >&2; exit 2 ;;
  esac
}
dim=64

# The write time of BYTES by two writers (one per rank), median of 3; the files are removed
# afterwards. With a second argument (dd's conv=fdatasync), until the bytes are on the disk.
write_seconds() {
  local bytes=$1 sync=${2:+conv=$2} half times=() r start end
  half=$(( (bytes / 2 + 1048575) / 1048576 ))
  for r in 1 2 3; do
    start=$EPOCHREALTIME
    # shellcheck disable=SC2086  # $sync is empty or one operand
    dd if=/dev/zero of="$out/dd0.tmp" bs=1M count="$half" status=none $sync &
    # shellcheck disable=SC2086
    dd if=/dev/zero of="$out/dd1.tmp" bs=1M count="$half" status=none $sync
    wait
    end=$EPOCHREALTIME
    rm -f "$out/dd0.tmp" "$out/dd1.tmp"
    times+=("$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f\n", b - a }')")
  done
  printf '%s\n' "${times[@]}" | median
}

# MPI start-up: attnbatch on a tiny input under mpirun -np 2.
tiny=$out/tiny.h5
[[ -f $tiny ]] || "$bin" generate --output "$tiny" --num-seqs 4 --seq-len 8 --dim 8 --force >/dev/null
startups=()
for _ in $(seq "$repeat"); do
  rm -f "$out/tiny_out.h5"
  startups+=("$(timed "${mpi[@]}" "$bin" run --input "$tiny" --output "$out/tiny_out.h5" --threads 1)")
done
startup=$(printf '%s\n' "${startups[@]}" | median)

results=$out/results.csv
echo "case,tool,run,seconds" >"$results"
table=$out/table.md
{
  echo "| case | attnbatch s | peer s, BLAS as installed | $(printf 'peer s, OpenBLAS %s | ' "${coretype_list[@]}")attnbatch vs fastest peer | start-up s | write s (bytes) | compute s | limit s | attnbatch/limit | start-up+write+compute s | write to disk s | durable limit s | attnbatch/durable limit |"
  echo "| --- | --- | --- | $(printf -- '--- | %.0s' "${coretype_list[@]}")--- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
} >"$table"

for case in "${case_list[@]}"; do
  read -r n len <<<"$(shape_of "$case")"
  input=$out/in_${n}_${len}.h5
  [[ -f $input ]] || "$python" "$peers/gen_input.py" "$input" "$n" "$len" "$dim" >/dev/null
  peer_flags=() ours_flags=(--save-weights none) bench_flags=() proj_gflop=0
  case $case in
    proj_weights)
      peer_flags=(--proj --weights) ours_flags=(--weights "$input" --save-weights all) bench_flags=(--save-weights all)
      proj_gflop=$(awk -v n="$n" -v l="$len" -v d="$dim" 'BEGIN { print 6 * n * l * d * d / 1e9 }') ;;
    long_weights) peer_flags=(--weights) ours_flags=(--save-weights all) bench_flags=(--save-weights all) ;;
  esac
  ours=() peer_installed=()
  declare -A peer_forced=()
  for r in $(seq "$repeat"); do
    rm -f "$out/ours.h5" "$out/ours.h5.partial" "$out/peer.h5"
    s=$(timed "${mpi[@]}" "$bin" run --input "$input" --output "$out/ours.h5" --threads 1 "${ours_flags[@]}" \
      --report "$out/report_$case.json")
    ours+=("$s"); echo "$case,attnbatch,$r,$s" >>"$results"
    bytes=$(stat -c %s "$out/ours.h5")
    rm -f "$out/ours.h5"
    s=$(timed "${mpi[@]}" "$python" "$peers/attn_mpi_h5.py" "$input" "$out/peer.h5" "${peer_flags[@]}")
    peer_installed+=("$s"); echo "$case,peer installed BLAS,$r,$s" >>"$results"
    for coretype in "${coretype_list[@]}"; do
      rm -f "$out/peer.h5"
      s=$(timed "${mpi[@]}" -x LD_LIBRARY_PATH="$openblas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" -x OPENBLAS_CORETYPE="$coretype" \
        "$python" "$peers/attn_mpi_h5.py" "$input" "$out/peer.h5" "${peer_flags[@]}")
      peer_forced[$coretype]+="$s "; echo "$case,peer OpenBLAS $coretype,$r,$s" >>"$results"
    done
    rm -f "$out/peer.h5"
  done
  t_ours=$(printf '%s\n' "${ours[@]}" | median)
  t_installed=$(printf '%s\n' "${peer_installed[@]}" | median)
  fastest=$t_installed forced_cells=""
  for coretype in "${coretype_list[@]}"; do
    # shellcheck disable=SC2086  # the runs' seconds, one word each
    t=$(printf '%s\n' ${peer_forced[$coretype]} | median)
    forced_cells+="$t | "
    fastest=$(awk -v a="$fastest" -v b="$t" 'BEGIN { print (b < a ? b : a) }')
  done
  unset peer_forced

  # The kernel's rate for this shape, one thread (batch sized for a stable timing).
  batch=$(( len >= 1024 ? 16 : 64 ))
  rate=$("$bin" bench --batch "$batch" --heads 1 --seq-len "$len" --head-dim "$dim" --threads 1 --repeats 7 --json \
    "${bench_flags[@]}" | sed -n 's/.*"gflops": \([0-9.e+-]*\).*/\1/p')
  attention_gflop=$(awk -v n="$n" -v l="$len" -v d="$dim" 'BEGIN { print 4 * n * l * l * d / 1e9 }')
  compute=$(awk -v a="$attention_gflop" -v p="$proj_gflop" -v r="$rate" 'BEGIN { printf "%.3f\n", (a + p) / (2 * r) }')
  write=$(write_seconds "$bytes")
  disk=$(write_seconds "$bytes" fdatasync)
  read -r limit ratio_limit serial ratio_peer durable ratio_durable <<<"$(awk -v s="$startup" -v w="$write" -v c="$compute" \
    -v d="$disk" -v o="$t_ours" -v f="$fastest" \
    'BEGIN { l = s + (w > c ? w : c); u = s + (d > c ? d : c); printf "%.3f %.2f %.3f %.2f %.3f %.2f\n", l, o / l, s + w + c, f / o, u, o / u }')"
  mib=$(awk -v b="$bytes" 'BEGIN { printf "%.0f MiB", b / 1048576 }')
  echo "| $case N=$n L=$len d=$dim | $t_ours | $t_installed | ${forced_cells}${ratio_peer}x | $startup | $write ($mib) | $compute ($rate GFLOP/s) | $limit | $ratio_limit | $serial | $disk | $durable | $ratio_durable |" >>"$table"
  echo "bench_e2e.sh: $case done (attnbatch $t_ours s, fastest peer $fastest s, limit $limit s)" >&2
done

echo "mpirun -np 2, 1 thread per rank, medians of $repeat; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%FT%TZ)"
cat "$table"
echo "runs: $results; attnbatch's phase breakdown per case: $out/report_CASE.json"
