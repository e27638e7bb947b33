#!/usr/bin/env bash
# submit-shards.sh (PBS) - submits the array job over a shard list, then a verify job that
# runs only when every sub-job succeeded (-W depend=afterok:ARRAY[]). Prints
#   array=JOBID verify=JOBID
#
#   jobs/pbs/submit-shards.sh [--samples S|all] LIST OUTDIR [run options]
#
# PBS Pro / OpenPBS syntax (-J, afterok on ARRAY[]); on Torque use -t and afterokarray.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { printf 'submit-shards.sh: ERROR: %s\n' "$*" >&2; exit 2; }

samples=8
if [ "${1:-}" = --samples ]; then samples=$2; shift 2; fi
[ $# -ge 2 ] || die "usage: submit-shards.sh [--samples S] LIST OUTDIR [run options]"
list=$1 outdir=$2
shift 2
[ -r "$list" ] || die "shard list '$list' is not readable"
n=$(grep -cvE '^[[:space:]]*(#|$)' "$list" || true)
[ "$n" -gt 0 ] || die "$list lists no shards"

export ATTNBATCH_REPO=${ATTNBATCH_REPO:-$(cd "$here/../.." && pwd)}
# Options travel in -v variables, not as `qsub -- script args`: with `--` PBS Pro would
# ignore the scripts' #PBS directives. ATTNBATCH_RUN_ARGS is split at spaces (and PBS
# splits -v at commas): put anything fancier in an INI file and pass --config FILE.
run_args="$*"
case $run_args in *,*) die "run options with commas cannot travel through qsub -v; use --config FILE.ini" ;; esac
vars="ATTNBATCH_REPO=$ATTNBATCH_REPO,ATTNBATCH_SHARD_LIST=$(realpath "$list"),ATTNBATCH_SHARD_OUTDIR=$(realpath -m "$outdir")"
[ -n "${ATTNBATCH:-}" ] && vars+=",ATTNBATCH=$ATTNBATCH"
# -J needs at least two sub-jobs in PBS Pro; a single shard is a plain job.
if [ "$n" -gt 1 ]; then
    array=$(qsub -J "0-$((n - 1))" -v "$vars,ATTNBATCH_RUN_ARGS=$run_args" "$here/attnbatch-array.pbs")
else
    array=$(qsub -v "$vars,ATTNBATCH_SHARD_INDEX=0,ATTNBATCH_RUN_ARGS=$run_args" "$here/attnbatch-array.pbs")
fi
verify=$(qsub -W depend="afterok:$array" -v "$vars,ATTNBATCH_VERIFY_ARGS=--samples $samples" "$here/verify-shards.pbs")
echo "array=$array verify=$verify"
