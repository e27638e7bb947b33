#!/usr/bin/env bash
# slurm_cluster.sh up|down - the ctest fixture around shared/slurm/local-cluster.sh.
#   up    starts the single-node cluster (installing its packages if missing) and checks
#         that srun has the pmix MPI plugin; FAILS loudly when it cannot: the job-script tests
#         need a real Slurm and must not pass without one.
#   down  stops the cluster again, but only if `up` started it (a cluster that was already
#         running when the tests began is left running).
set -uo pipefail
# shellcheck source=tests/jobs/lib.sh
source "$(dirname "$0")/lib.sh"
STATE=${ATTNBATCH_SLURM_FIXTURE_STATE:-/tmp/attnbatch-tests-slurm-started}

case ${1:-} in
    up)
        [ -r "$LOCAL_SLURM" ] || die "$LOCAL_SLURM not found: cannot start the local Slurm cluster (set ATTNBATCH_LOCAL_SLURM)"
        [ "$(id -u)" = 0 ] || die "the local Slurm cluster runs its daemons as root; this test runs as $(id -un)"
        rm -f "$STATE"
        if bash "$LOCAL_SLURM" status >/dev/null 2>&1; then
            note "local Slurm cluster already running; leaving it running afterwards"
        else
            t0=$SECONDS
            if ! bash "$LOCAL_SLURM" start; then
                echo "##########################################################################"
                echo "FAIL: the local Slurm cluster did not start (see the log tails above)."
                echo "      The job-script tests that need it will not run and count as failed."
                echo "##########################################################################"
                exit 1
            fi
            echo started >"$STATE"
            note "local Slurm cluster started in $((SECONDS - t0)) s"
        fi
        slurm_env
        srun --mpi=list 2>&1 | grep -qw pmix || die "srun --mpi=list has no pmix plugin: $(srun --mpi=list 2>&1 | tr '\n' ' ')"
        sinfo -h -o '%P %a %D %T %c CPUs' || die "sinfo fails"
        ok "local Slurm cluster up, srun has pmix"
        ;;
    down)
        if [ -r "$STATE" ]; then
            rm -f "$STATE"
            bash "$LOCAL_SLURM" stop || die "stopping the local Slurm cluster failed"
            ok "local Slurm cluster stopped"
        else
            ok "local Slurm cluster was running before the tests; left running"
        fi
        ;;
    *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
