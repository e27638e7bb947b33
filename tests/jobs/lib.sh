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

# reference_sequences SECONDS RANKS: sequences of the long jobs' shape that the fp64 reference
# kernel does in about SECONDS on RANKS ranks, timed now (tests/support/harness.py says why a
# time and not a count).
reference_sequences() {
    /usr/bin/python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); from harness import reference_sequences
print(reference_sequences(*sys.argv[2:]))' "$REPO/tests/support" "$BIN" "$1" "$2" || die "timing the reference kernel failed"
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
