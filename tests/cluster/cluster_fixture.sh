#!/usr/bin/env bash
# cluster_fixture.sh up|down - the ctest fixture around local-cluster.sh: the multi-node rig
# every test labelled multinode (and every Slurm job-script test) runs on.
#   up    starts the rig in the suite's shape (4 nodes, memory cgroups of 3, 2, 3 and 2 GiB
#         where the machine has them), or keeps one already running in that shape. Exit 77
#         with local-cluster.sh's one line where namespaces are not permitted (ctest: skipped;
#         the tests needing the rig then skip themselves with the same line); fails loudly
#         when the rig could run but did not start.
#   down  stops the rig again, but only if `up` started it.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rig=$here/local-cluster.sh
state=${ATTNBATCH_CLUSTER_DIR:-/tmp/attnbatch-cluster}.started-by-ctest
shape=(--nodes 4 --memory "3G,2G")

case ${1:-} in
    up)
        rm -f "$state"
        why=$(bash "$rig" check) || { echo "$why"; exit 77; }
        t0=$SECONDS
        if bash "$rig" status >/dev/null 2>&1 && bash "$rig" status | grep -q "^shape: nodes=4 memory=3G,2G "; then
            echo "the rig was already running in this shape; it is left running afterwards"
        else
            rc=0
            bash "$rig" start "${shape[@]}" || rc=$?
            if [ $rc != 0 ]; then
                echo "FAIL: the multi-node rig did not start (exit $rc; log tails above). The tests that need it fail."
                exit 1
            fi
            echo started >"$state"
        fi
        bash "$rig" status || { echo "FAIL: the rig is not usable after start"; exit 1; }
        echo "ok: rig up in $((SECONDS - t0)) s"
        ;;
    down)
        if [ -e "$state" ]; then
            rm -f "$state"
            bash "$rig" stop || { echo "FAIL: stopping the rig failed"; exit 1; }
            echo "ok: rig stopped"
        else
            echo "ok: the rig was not started by these tests; left as it was"
        fi
        ;;
    *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
