# shellcheck shell=bash
# lib.sh - helpers for the job-script tests (sourced). Every check that fails prints FAIL
# with the evidence (job log, scontrol record) and the test exits 1 at the end; a test never
# passes by skipping.

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
failures=0

note() { printf '[%s] %s\n' "$(date +%T)" "$*"; }
fail() { printf 'FAIL: %s\n' "$*"; failures=$((failures + 1)); }
ok() { printf 'ok: %s\n' "$*"; }
check() {  # check DESCRIPTION COMMAND...: ok when the command succeeds
    local what=$1
    shift
    if "$@"; then ok "$what"; else fail "$what"; fi
}
finish() {
    if [ "$failures" -gt 0 ]; then
        echo "$failures check(s) FAILED"
        exit 1
    fi
    echo "all checks passed"
    exit 0
}
die() { printf 'FAIL: %s\n' "$*"; exit 1; }

# reference_sequences SECONDS RANKS: how many sequences of the long jobs' shape (generate
# --seq-len 256 --dim 64 --heads 4: four heads of 16) the fp64 reference kernel gets through in
# about SECONDS on RANKS ranks, timed here and now, in whole units of 4 per rank. The jobs that
# are signalled or lose a node mid-run need a run still going when that happens, which is a
# time, not a count: this project's machines have differed eightfold in the reference kernel's
# rate (a Zen 5 did 80-100 sequences a second per core, a Xeon does 12), and a busy suite halves it.
reference_sequences() {
    local seconds=$1 ranks=$2 timing
    timing=$("$BIN" bench --kernel reference --batch 2 --heads 4 --seq-len 256 --head-dim 16 --threads 1 --repeats 3 \
        --json) || die "attnbatch bench --kernel reference failed"
    /usr/bin/python3 -c '
import json, sys
per_sequence = json.loads(sys.argv[1])["median_seconds"] / 2
seconds, ranks = float(sys.argv[2]), int(sys.argv[3])
unit = 4 * ranks
print(max(2 * unit, round(seconds * ranks / per_sequence / unit) * unit))' "$timing" "$seconds" "$ranks"
}

# ------------------------------------------------------------------ the rig's Slurm cluster
# tests/cluster/local-cluster.sh: nodes in network namespaces on this host, one slurmd each
# (the ctest fixture multinode.cluster_up starts it).
RIG=$REPO/tests/cluster/local-cluster.sh

# The rig's controller and Open MPI settings, whatever the caller's environment says; no
# allocation of an enclosing job leaks in. Exit 77 (skipped) with the rig's one line where
# namespaces are not permitted; a failure when the rig could run but is not up.
slurm_env() {
    local why v
    why=$(bash "$RIG" check) || { echo "$why"; exit 77; }
    for v in $(compgen -e | grep -E '^(SLURM_|SBATCH_|SRUN_|SALLOC_|OMPI_MCA_)'); do unset "$v"; done
    eval "$(bash "$RIG" env)" || die "the rig is not started (the fixture test multinode.cluster_up starts it)"
    bash "$RIG" status >/dev/null 2>&1 ||
        die "the rig is not up (bash $RIG status fails); the fixture test multinode.cluster_up starts it"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

# job_field JOB FIELD: one field of `scontrol show job` (the first record for an array).
job_field() {
    scontrol -o show job "$1" 2>/dev/null | head -n1 | grep -oE "(^| )$2=[^ ]*" | head -n1 | sed "s/^ *$2=//"
}

# wait_job JOB [TIMEOUT]: wait (0.5 s polling); print the states; return the job's exit code.
wait_job() {
    bash "$RIG" wait "$1" "${2:-120}"
}

# job_log FILE: print a job's log for the evidence.
show_log() {
    echo "----- $1"
    cat "$1" 2>/dev/null || echo "(missing)"
    echo "-----"
}
