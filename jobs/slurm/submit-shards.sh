#!/usr/bin/env bash
# submit-shards.sh - submits the array job over a shard list and a verify job that runs only
# when every array task succeeded (--dependency=afterok:ARRAY_JOB). Prints
#   array=JOBID verify=JOBID
#
#   jobs/slurm/submit-shards.sh [--parallel K] [--samples S|all] [--cpus C] [--nodes N]
#                               [--tasks-per-node R] LIST OUTDIR [run options]
#   jobs/slurm/submit-shards.sh shards.txt results/ --heads 8 --save-weights none
#   jobs/slurm/submit-shards.sh --nodes 2 --tasks-per-node 4 --cpus 8 shards.txt results/ --heads 8
#
# --parallel K: at most K array tasks at a time (--array=0-N%K). --cpus, --nodes and
# --tasks-per-node shape each task (sbatch -c, -N, --ntasks-per-node: a shard can span nodes).
# Other sbatch settings come from sbatch's input variables (SBATCH_PARTITION,
# SBATCH_TIMELIMIT, SBATCH_ACCOUNT, ...).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { printf 'submit-shards.sh: ERROR: %s\n' "$*" >&2; exit 2; }

parallel="" samples=8 cpus="" nodes="" per_node=""
while [ $# -gt 0 ]; do
    case $1 in
        --parallel) parallel=$2; shift 2 ;;
        --samples) samples=$2; shift 2 ;;
        --cpus) cpus=$2; shift 2 ;;
        --nodes) nodes=$2; shift 2 ;;
        --tasks-per-node) per_node=$2; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) break ;;
    esac
done
[ $# -ge 2 ] || die "usage: submit-shards.sh [--parallel K] [--samples S] [--cpus C] [--nodes N] [--tasks-per-node R] LIST OUTDIR [run options]"
list=$1 outdir=$2
shift 2
[ -r "$list" ] || die "shard list '$list' is not readable"
n=$(grep -cvE '^[[:space:]]*(#|$)' "$list" || true)
[ "$n" -gt 0 ] || die "$list lists no shards"
while IFS= read -r line; do
    read -r first rest <<<"$line"
    f=$line
    if [[ $first =~ ^[0-9]*:[0-9]*$|^[0-9]+$ ]] && [ -n "$rest" ]; then f=$rest; fi
    [ -r "$f" ] || die "$list: input '$f' is not readable"
done < <(grep -vE '^[[:space:]]*(#|$)' "$list")

# The job scripts find the repository (and build/attnbatch) through ATTNBATCH_REPO.
export ATTNBATCH_REPO=${ATTNBATCH_REPO:-$(cd "$here/../.." && pwd)}
range="0-$((n - 1))${parallel:+%$parallel}"
array_opts=(--parsable --array="$range")
[ -n "$cpus" ] && array_opts+=(--cpus-per-task="$cpus")
[ -n "$nodes" ] && array_opts+=(--nodes="$nodes")
[ -n "$per_node" ] && array_opts+=(--ntasks-per-node="$per_node")
array=$(sbatch "${array_opts[@]}" "$here/attnbatch-array.sbatch" "$list" "$outdir" "$@")
array=${array%%;*}
verify=$(sbatch --parsable --dependency="afterok:$array" --kill-on-invalid-dep=yes \
    "$here/verify-shards.sbatch" "$list" "$outdir" --samples "$samples")
verify=${verify%%;*}
echo "array=$array verify=$verify"
