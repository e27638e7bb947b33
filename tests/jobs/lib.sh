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

# ------------------------------------------------------------------ the local Slurm cluster
LOCAL_SLURM=${ATTNBATCH_LOCAL_SLURM:-$REPO/../shared/slurm/local-cluster.sh}
[ -r "$LOCAL_SLURM" ] || [ -n "${ATTNBATCH_LOCAL_SLURM:-}" ] || LOCAL_SLURM=/work/shared/slurm/local-cluster.sh

slurm_env() {
    [ -r "$LOCAL_SLURM" ] ||
        die "the local Slurm cluster script $LOCAL_SLURM is missing (set ATTNBATCH_LOCAL_SLURM): these tests need a real Slurm"
    # Our controller, whatever /etc/slurm says; no allocation of an enclosing job leaks in.
    eval "$(bash "$LOCAL_SLURM" env)"
    export SLURM_CONF
    local v
    for v in $(compgen -e | grep -E '^(SLURM_|SBATCH_|SRUN_|SALLOC_)' | grep -v '^SLURM_CONF$'); do unset "$v"; done
    bash "$LOCAL_SLURM" status >/dev/null 2>&1 ||
        die "the local Slurm cluster is not up (bash $LOCAL_SLURM status fails); the fixture test jobs.slurm.cluster_up starts it"
    # Open MPI: root is allowed; shared memory only, so nothing listens beyond loopback.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
}

# job_field JOB FIELD: one field of `scontrol show job` (the first record for an array).
job_field() {
    scontrol -o show job "$1" 2>/dev/null | head -n1 | grep -oE "(^| )$2=[^ ]*" | head -n1 | sed "s/^ *$2=//"
}

# wait_job JOB [TIMEOUT]: wait (0.5 s polling); print the states; return the job's exit code.
wait_job() {
    bash "$LOCAL_SLURM" wait "$1" "${2:-120}"
}

# job_log FILE: print a job's log for the evidence.
show_log() {
    echo "----- $1"
    cat "$1" 2>/dev/null || echo "(missing)"
    echo "-----"
}
