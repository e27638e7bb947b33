#!/usr/bin/env bash
# fake_attnbatch.sh - stands in for `attnbatch run` to test the job scripts' signal and
# requeue protocol independently of the real binary: without --resume it reports itself
# started (file STARTED.<rank> beside --output), waits up to 60 s for SIGUSR1 or SIGTERM and
# then exits 5 ("checkpoint written"); with --resume it writes --output and exits 0.
set -u
[ "${1:-}" = run ] || { echo "fake_attnbatch: expected 'run'" >&2; exit 2; }
shift
out="" resume=0
while [ $# -gt 0 ]; do
    case $1 in
        --output) out=$2; shift ;;
        --resume) resume=1 ;;
    esac
    shift
done
[ -n "$out" ] || { echo "fake_attnbatch: no --output" >&2; exit 2; }
# mpirun children inherit the batch step's SLURM_PROCID=0: ask Open MPI first.
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${SLURM_PROCID:-0}}}
if [ $resume = 1 ]; then
    echo "fake_attnbatch rank $rank: resumed, finishing"
    [ "$rank" = 0 ] && echo finished >"$out"
    exit 0
fi
got=
trap 'got=USR1' USR1
trap 'got=TERM' TERM
echo "fake_attnbatch rank $rank: started, waiting for a signal"
: >"$(dirname "$out")/STARTED.$rank"
for _ in $(seq 1 600); do
    if [ -n "$got" ]; then
        echo "fake_attnbatch rank $rank: SIG$got -> checkpoint written, exit 5"
        exit 5
    fi
    sleep 0.1
done
echo "fake_attnbatch rank $rank: no signal within 60 s" >&2
exit 9
