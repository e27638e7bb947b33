#!/usr/bin/env bash
# End to end against the peer at its fastest and against this sitting's limits: whole
# `mpirun -np 2` wall time (1 thread per rank) of attnbatch and of the mpi4py + h5py + numpy
# peer script (attn_mpi_h5.py) on the same input, runs interleaved (attnbatch in each mode,
# the peer per OpenBLAS core type, ...) so that the host's noise hits all alike, each round in
# another order (no run follows the same one twice, where the rounds allow); medians.
#
# attnbatch runs in both of its publication modes, each judged against its own limit:
#   --fsync off  published without syncing, as the peer (which never syncs) writes: against
#                the fastest peer and the page-cache limit
#   --fsync on   (the default) published once on the disk: against the durable limit
# The limits, from quantities measured in the same sitting:
#   start-up   attnbatch run on a tiny input under mpirun -np 2 (process start, MPI_Init,
#              HDF5, exit: what every run pays)
#   write      the case's output bytes written through the page cache by two dd writers (one
#              per rank) into the same directory, timed as one more entry of the rounds below
#              (after the run before it, as each run is): the page cache as the runs meet it
#   back-to-back write  the same bytes by the same writers, three times in a row, each landing
#              on the pages the one before freed a moment ago: the page cache at its warmest
#   disk       the same with conv=fdatasync: until the bytes are on the disk
#   compute    the case's attention (and projection) GFLOP over two cores at the rate
#              `attnbatch bench` measures for that shape on one thread
#   page-cache limit  start-up + max(write, compute), and beside it the same with the
#                     back-to-back write
#   durable limit     start-up + max(disk, compute)
# On 2 cores both ranks compute, so the copy into the page cache cannot hide behind compute:
# start-up + write + compute is printed too. The sitting's disk rates (GB/s, 640 MiB from two
# writers, at the start and the end) head the table: a slow disk moves the durable limit. So
# does the page-cache rate after 3 s idle: on a virtual machine that hands free memory back to
# its host, fresh pages can cost several times more than reused ones, for both tools alike.
#
#   scripts/bench_e2e.sh --peers DIR [--repeat R] [--out DIR] [--cases LIST] [--bin PATH]
#                        [--before PATH] [--openblas DIR] [--coretypes LIST] [--installed-blas]
#                        [--bind core|none]
#
#   --peers DIR       directory holding the peer scripts attn_mpi_h5.py and gen_input.py
#                     (required; or PEERS=DIR in the environment)
#   --repeat R        runs per tool and case, the median is printed (5)
#   --out DIR         scratch directory for inputs, outputs, logs and results
#                     (/tmp/attnbatch-bench-e2e); its file system is the one measured
#   --cases LIST      comma-separated subset of: plain, proj_weights, long_weights, large (all)
#   --bin PATH        attnbatch binary (build/attnbatch)
#   --before PATH     another attnbatch binary (one from before a change), run interleaved in
#                     both modes: its times and phases beside this one's
#   --openblas DIR    OpenBLAS's libblas.so.3 directory, put first in LD_LIBRARY_PATH for the
#                     peer (found under /usr/lib/*/openblas-pthread; installed with apt-get
#                     install libopenblas0-pthread when missing and run as root)
#   --coretypes LIST  OPENBLAS_CORETYPE values the peer is tried with (the ones this CPU runs:
#                     SkylakeX,Cooperlake with AVX-512 (Cooperlake needs AVX512-BF16),
#                     Haswell,Zen with AVX2)
#   --installed-blas  also run the peer with numpy's BLAS as installed (libblas.so.3 as the
#                     system's alternatives select it: the reference BLAS on a fresh Debian,
#                     3-4x slower than OpenBLAS)
#   --bind core|none  placement of both tools' ranks (core): each bound to its share of the
#                     cores (scripts/mpi_placement.sh); with one thread per rank and a rank
#                     per core that is a core each, Open MPI's default placement and the peer
#                     script's own (its header's mpirun line). none
#                     lets the scheduler move the ranks' threads between the cores: 6% slower
#                     for attnbatch, and 2x slower for the peer with projections and maps
#
# Cases (d = 64, float32):
#   plain         N=2048 L=256, output only
#   proj_weights  N=2048 L=256, projections (w_q, w_k, w_v of the input file), all weights written
#   long_weights  N=256 L=1024, all weights written
#   large         N=1024 L=1024, output only (start-up weighs less)
# The peer's command runs without the machine's pinned OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
# (OpenBLAS then sizes its blocking from the CPU itself); attnbatch's runs keep the environment.
# A report (run --report) of attnbatch's last run of each case and mode is kept in
# OUT/report_CASE_MODE.json; the phase table below the results is read from them (with the
# bytes the run wrote past the page cache: whole chunks in the durable mode).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  sed -n '/^#   scripts/,/^#   large/p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

peers=${PEERS:-} repeat=5 out=/tmp/attnbatch-bench-e2e cases=plain,proj_weights,long_weights,large
bin=$PWD/build/attnbatch before="" openblas="" coretypes="" installed_blas=0 bind=core
while [[ $# -gt 0 ]]; do
  case $1 in
    --peers) peers=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --before) before=$2; shift 2 ;;
    --openblas) openblas=$2; shift 2 ;;
    --coretypes) coretypes=$2; shift 2 ;;
    --installed-blas) installed_blas=1; shift ;;
    --bind) bind=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bench_e2e.sh: unknown option $1" >&2; usage ;;
  esac
done
if [[ -z $peers ]]; then
  echo "bench_e2e.sh: the peer scripts' directory is required: --peers DIR or PEERS=DIR" >&2
  usage
fi
[[ $bind == core || $bind == none ]] || { echo "bench_e2e.sh: --bind $bind: expected core or none" >&2; exit 2; }
for script in attn_mpi_h5.py gen_input.py; do
  [[ -f $peers/$script ]] || { echo "bench_e2e.sh: $peers/$script not found; expected the peer scripts in --peers DIR" >&2; exit 2; }
done
for binary in "$bin" ${before:+"$before"}; do
  [[ -x $binary ]] || { echo "bench_e2e.sh: $binary is not an executable; build it (scripts/build.sh) or give --bin/--before" >&2; exit 2; }
done
bin=$(readlink -f "$bin")
[[ -z $before ]] || before=$(readlink -f "$before")

# shellcheck source=scripts/openblas_peer.sh
source scripts/openblas_peer.sh
openblas=$(openblas_dir "$openblas") || exit 2
[[ -n $coretypes ]] || coretypes=$(openblas_coretypes)

python=/usr/bin/python3  # Debian's h5py, mpi4py and numpy belong to it
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"
out=$(cd "$out" && pwd)
# shellcheck source=scripts/mpi_placement.sh
source scripts/mpi_placement.sh
read -r -a place <<<"$(placement "$bind" 2 1)"
mpi=(mpirun -np 2 --oversubscribe "${place[@]}" -x OPENBLAS_NUM_THREADS=1 -x OMP_NUM_THREADS=1)
# The peer's command alone runs without the pinned values (peer_env; the ranks inherit mpirun's
# environment).
IFS=, read -r -a coretype_list <<<"$coretypes"
IFS=, read -r -a case_list <<<"$cases"

# shellcheck source=scripts/bench_timing.sh
source scripts/bench_timing.sh

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# case -> "N L"
shape_of() {
  case $1 in
    plain|proj_weights) echo "2048 256" ;;
    long_weights) echo "256 1024" ;;
    large) echo "1024 1024" ;;
    *) echo "bench_e2e.sh: unknown case $1 (expected plain, proj_weights, long_weights, large)" >&2; exit 2 ;;
  esac
}
dim=64

# BYTES written by two writers (one per rank) into $out/dd0.tmp and dd1.tmp, which the caller
# removes. With a second argument (dd's conv=fdatasync), until the bytes are on the disk.
two_writers() {  # bytes [fdatasync]
  local half=$(( ($1 / 2 + 1048575) / 1048576 )) sync=${2:+conv=$2}
  # shellcheck disable=SC2086  # $sync is empty or one operand
  dd if=/dev/zero of="$out/dd0.tmp" bs=1M count="$half" status=none $sync &
  # shellcheck disable=SC2086
  dd if=/dev/zero of="$out/dd1.tmp" bs=1M count="$half" status=none $sync
  wait
}
# The write time of BYTES by two_writers, three times back to back, the median; the files are
# removed after each write.
write_seconds() {  # bytes [fdatasync] [idle seconds before each write]
  local bytes=$1 sync=${2:-} idle=${3:-0} times=() r start end
  for r in 1 2 3; do
    sleep "$idle"
    start=$EPOCHREALTIME
    two_writers "$bytes" "$sync"
    end=$EPOCHREALTIME
    rm -f "$out/dd0.tmp" "$out/dd1.tmp"
    times+=("$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f\n", b - a }')")
  done
  printf '%s\n' "${times[@]}" | median
}
# "page-cache GB/s, durable GB/s, page-cache GB/s after 3 s idle" of 640 MiB from two writers.
# The first two are medians of back-to-back writes, each landing on the pages the one before
# freed. After a pause, a virtual machine may have handed its free memory back to the host (free
# page reporting), and each fresh page then costs a fault on the host: the third rate says how
# dear fresh memory was in the sitting (docs/performance.md "Measuring on a shared machine").
disk_rates() {
  local bytes=$((640 * 1048576))
  awk -v b="$bytes" -v w="$(write_seconds "$bytes")" -v d="$(write_seconds "$bytes" fdatasync)" \
    -v i="$(write_seconds "$bytes" "" 3)" 'BEGIN { printf "%.2f %.2f %.2f\n", b / w / 1e9, b / d / 1e9, b / i / 1e9 }'
}

read -r cache_rate_start disk_rate_start idle_rate_start <<<"$(disk_rates)"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# MPI start-up: attnbatch on a tiny input under mpirun -np 2.
tiny=$out/tiny.h5
[[ -f $tiny ]] || "$bin" generate --output "$tiny" --num-seqs 4 --seq-len 8 --dim 8 --force >/dev/null
startups=()
for _ in $(seq "$repeat"); do
  rm -f "$out/tiny_out.h5"
  startups+=("$(timed "${mpi[@]}" "$bin" run --input "$tiny" --output "$out/tiny_out.h5" --threads 1 --fsync off)")
done
startup=$(printf '%s\n' "${startups[@]}" | median)

results=$out/results.csv limits=$out/limits.csv
echo "case,tool,run,seconds" >"$results"
echo "case,n,len,bytes,startup,write,back_to_back,disk,compute,rate" >"$limits"
ours_run() {  # case mode binary [flags...]: one timed attnbatch run, its report kept
  local case=$1 mode=$2 binary=$3 s
  shift 3
  rm -f "$out/ours.h5" "$out/ours.h5.partial"
  s=$(timed "${mpi[@]}" "$binary" run --input "$input" --output "$out/ours.h5" --threads 1 "$@" \
    --report "$out/report_${case}_$mode.json")
  echo "$case,attnbatch $mode,$r,$s" >>"$results"
}

for case in "${case_list[@]}"; do
  read -r n len <<<"$(shape_of "$case")"
  input=$out/in_${n}_${len}.h5
  [[ -f $input ]] || "$python" "$peers/gen_input.py" "$input" "$n" "$len" "$dim" >/dev/null
  peer_flags=() ours_flags=(--save-weights none) bench_flags=() proj_gflop=0 bytes=""
  case $case in
    proj_weights)
      peer_flags=(--proj --weights) ours_flags=(--weights "$input" --save-weights all) bench_flags=(--save-weights all)
      proj_gflop=$(awk -v n="$n" -v l="$len" -v d="$dim" 'BEGIN { print 6 * n * l * d * d / 1e9 }') ;;
    long_weights) peer_flags=(--weights) ours_flags=(--save-weights all) bench_flags=(--save-weights all) ;;
  esac
  # The runs of a round, each removing its output as it ends. A run pays for what the one before
  # it left (memory freed a moment ago that the host has taken back, pages still dirty), so the
  # order changes from round to round: round r starts at entry r - 1 and walks the list with a
  # step prime to its length, a different step each round, so that an entry's predecessor
  # changes too. (Turning one order alone kept each entry behind the same one in all rounds but
  # one: the no-sync run behind the page-cache writers' 640 MiB just freed, for one.) Round 1
  # keeps the list's order: its no-sync run gives the page-cache entry its bytes.
  entries=(no-sync durable)
  [[ -z $before ]] || entries+=(before "before no-sync")
  (( installed_blas )) && entries+=("peer installed")
  for coretype in "${coretype_list[@]}"; do entries+=("peer $coretype"); done
  # The page cache as the runs meet it; it needs the case's output bytes, which the first
  # round's first entry (no-sync) has written.
  entries+=("page cache")
  count=${#entries[@]} steps=()
  for ((step = 1; step <= count; step++)); do
    a=$step b=$count
    while (( b )); do rest=$((a % b)) a=$b b=$rest; done
    (( a == 1 )) && steps+=("$step")
  done
  for r in $(seq "$repeat"); do
    step=${steps[(r - 1) % ${#steps[@]}]}
    for ((e = 0; e < count; e++)); do
      entry=${entries[(r - 1 + e * step) % count]}
      case $entry in
        no-sync) ours_run "$case" no-sync "$bin" "${ours_flags[@]}" --fsync off ;;
        durable) ours_run "$case" durable "$bin" "${ours_flags[@]}" ;;
        before) ours_run "$case" before "$before" "${ours_flags[@]}" ;;
        "before no-sync") ours_run "$case" before-no-sync "$before" "${ours_flags[@]}" --fsync off ;;
        "page cache")  # the files go after the entry, with the runs' outputs
          s=$(timed two_writers "$bytes")
          echo "$case,page cache (two dd writers),$r,$s" >>"$results" ;;
        "peer installed")
          rm -f "$out/peer.h5"
          s=$(timed "${mpi[@]}" "$python" "$peers/attn_mpi_h5.py" "$input" "$out/peer.h5" "${peer_flags[@]}")
          echo "$case,peer installed BLAS,$r,$s" >>"$results" ;;
        *)
          coretype=${entry#peer }
          rm -f "$out/peer.h5"
          s=$(timed "${peer_env[@]}" "${mpi[@]}" -x LD_LIBRARY_PATH="$openblas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            -x OPENBLAS_CORETYPE="$coretype" "$python" "$peers/attn_mpi_h5.py" "$input" "$out/peer.h5" "${peer_flags[@]}")
          echo "$case,peer OpenBLAS $coretype,$r,$s" >>"$results" ;;
      esac
      [[ ! -f $out/ours.h5 ]] || bytes=$(stat -c %s "$out/ours.h5")
      rm -f "$out/ours.h5" "$out/peer.h5" "$out/dd0.tmp" "$out/dd1.tmp"
    done
  done

  # The kernel's rate for this shape, one thread (batch sized for a stable timing).
  batch=$(( len >= 1024 ? 16 : 64 ))
  rate=$("$bin" bench --batch "$batch" --heads 1 --seq-len "$len" --head-dim "$dim" --threads 1 --repeats 7 --json \
    "${bench_flags[@]}" | sed -n 's/.*"gflops": \([0-9.e+-]*\).*/\1/p')
  compute=$(awk -v n="$n" -v l="$len" -v d="$dim" -v p="$proj_gflop" -v r="$rate" \
    'BEGIN { printf "%.3f\n", (4 * n * l * l * d / 1e9 + p) / (2 * r) }')
  write=$(grep "^$case,page cache (two dd writers)," "$results" | cut -d, -f4 | median)
  echo "$case,$n,$len,$bytes,$startup,$write,$(write_seconds "$bytes"),$(write_seconds "$bytes" fdatasync),$compute,$rate" >>"$limits"
  echo "bench_e2e.sh: $case done" >&2
done

read -r cache_rate_end disk_rate_end idle_rate_end <<<"$(disk_rates)"
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
echo "mpirun -np 2 ${place[*]}, 1 thread per rank, medians of $repeat, interleaved in varied orders; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(date -u +%FT%TZ)"
echo "load average (1, 5, 15 min) at the start $load_start, at the end $load_end"
echo "disk, 640 MiB from two writers: page cache $cache_rate_start GB/s at the start, $cache_rate_end at the end; durable (conv=fdatasync) $disk_rate_start GB/s at the start, $disk_rate_end at the end"
echo "page cache after 3 s idle (fresh memory): $idle_rate_start GB/s at the start, $idle_rate_end at the end"
echo "peer: OpenBLAS $openblas, core types tried: $coretypes (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset for its command)"
"$python" - "$results" "$limits" "$out" "$before" <<'EOF'
import csv, json, os, statistics, sys
results, limits, out, before = sys.argv[1:5]
runs = {}
for row in csv.DictReader(open(results)):
    runs.setdefault((row["case"], row["tool"]), []).append(float(row["seconds"]))
med = {key: statistics.median(v) for key, v in runs.items()}
mark = lambda ok: "yes" if ok else "NO"
print()
print("| case | attnbatch no-sync s | fastest peer s (core type) | peer / no-sync (>= 2) | page-cache limit s | no-sync / limit (<= 1.3) "
      "| back-to-back limit s | no-sync / back-to-back limit "
      "| attnbatch durable s | durable limit s | durable / limit (<= 1.3) | start-up s | write s | back-to-back write s | disk s "
      "| compute s (GFLOP/s) | start-up+write+compute s |" + (" before no-sync s | before durable s |" if before else ""))
print("| --- " * (17 + 2 * bool(before)) + "|")
peers_table = []
for lim in csv.DictReader(open(limits)):
    case = lim["case"]
    s, w, b, d, c = (float(lim[k]) for k in ("startup", "write", "back_to_back", "disk", "compute"))
    cache_limit, warm_limit, durable_limit = s + max(w, c), s + max(b, c), s + max(d, c)
    peers = sorted((t, tool[len("peer "):]) for (k, tool), t in med.items() if k == case and tool.startswith("peer "))
    fastest, which = peers[0]
    no_sync, durable = med[(case, "attnbatch no-sync")], med[(case, "attnbatch durable")]
    row = ("| %s N=%s L=%s (%.0f MiB) | %.3f | %.3f (%s) | %.2fx %s | %.3f | %.2f %s | %.3f | %.2f | %.3f | %.3f | %.2f %s "
           "| %.3f | %.3f | %.3f | %.3f | %.3f (%s) | %.3f |") % (
        case, lim["n"], lim["len"], int(lim["bytes"]) / 2**20, no_sync, fastest, which, fastest / no_sync, mark(fastest / no_sync >= 2),
        cache_limit, no_sync / cache_limit, mark(no_sync / cache_limit <= 1.3), warm_limit, no_sync / warm_limit,
        durable, durable_limit, durable / durable_limit, mark(durable / durable_limit <= 1.3), s, w, b, d, c, lim["rate"], s + w + c)
    if before:
        row += " %.3f | %.3f |" % (med[(case, "attnbatch before-no-sync")], med[(case, "attnbatch before")])
    print(row)
    peers_table.append((case, peers))
print()
print("peer medians per BLAS: " + "; ".join("%s: %s" % (case, ", ".join("%s %.3f s" % (which, t) for t, which in peers))
                                            for case, peers in peers_table))
print()
modes = ["no-sync", "durable"] + (["before-no-sync", "before"] if before else [])
phases = ["mpi_init", "describe", "lengths", "plan", "preflight", "value_scan", "output_creation", "first_read", "rounds",
          "last_write", "close", "publish"]
print("phase_seconds of the last run (slowest rank per phase):")
print("| case | mode | wall | " + " | ".join(phases) + " | compute (sum) | compute CPU (sum) | of it system | main thread CPU (sum) "
      "| write (sum) | past the page cache (MiB) |")
print("| --- " * (len(phases) + 9) + "|")
# CPU clocks (binaries from 2026-12-07 on): compute CPU under compute is time the compute
# waited for its core; its system share is mostly first touches of fresh memory.
def cpu_sum(ranks, key):
    return "%.3f" % sum(r[key] for r in ranks) if ranks and all(key in r for r in ranks) else "-"
for case, _ in peers_table:
    for mode in modes:
        path = os.path.join(out, "report_%s_%s.json" % (case, mode))
        if not os.path.exists(path):
            continue
        report = json.load(open(path))
        got = report.get("phase_seconds", {})
        ranks = report.get("per_rank", [])
        direct = [r["direct_write_bytes"] for r in ranks if "direct_write_bytes" in r]
        print("| %s | %s | %.3f | %s | %.3f | %s | %s | %s | %.3f | %s |" % (case, mode, report.get("wall_seconds", 0),
              " | ".join("%.3f" % got[p] if p in got else "-" for p in phases),
              sum(r.get("compute", 0) for r in ranks), cpu_sum(ranks, "compute_cpu"), cpu_sum(ranks, "compute_system"),
              cpu_sum(ranks, "io_cpu"),
              sum(r.get("write", 0) for r in ranks), "%.0f" % (sum(direct) / 2**20) if direct else "-"))
EOF
echo "runs: $results; limits: $limits; reports: $out/report_CASE_MODE.json"
