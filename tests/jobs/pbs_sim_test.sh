#!/usr/bin/env bash
# pbs_sim_test.sh one_node|select2 ATTNBATCH WORKDIR - runs the jobs/pbs scripts the way a PBS
# mom would (bash on a copy of the script, in a fake job environment: PBS_O_WORKDIR,
# PBS_NODEFILE, PBS_JOBID, PBS_ARRAY_INDEX, OMP_NUM_THREADS as PBS Pro sets it from
# ompthreads), because no PBS server can run here. qsub/qrerun are stubs that record their
# arguments.
# select2: -l select=2:ncpus=2:mpiprocs=2:ompthreads=1 on the multi-node rig: the script runs
# inside node1 (the mother superior) with PBS_NODEFILE listing node1 and node2 twice each, and
# mpirun reaches node2 through the rig's rsh agent. Checks: 4 ranks on 2 nodes (the report),
# output verifies; an array sub-job the same; node2 lost mid-run -> mpirun's own exit code
# taken as a lost node -> exit 5 and qrerun; the rerun resumes and verifies. Exit 77 where the
# rig cannot run.
# one_node checks:
#   - attnbatch.pbs: ranks from PBS_NODEFILE, threads from OMP_NUM_THREADS, mpirun launch,
#     options from arguments and from ATTNBATCH_RUN_ARGS; output verifies
#   - attnbatch-array.pbs x 3 sub-jobs + verify-shards.pbs: every shard verifies
#   - the exit-5 protocol with the stand-in binary: SIGTERM (what PBS sends at the walltime)
#     -> forwarded to mpirun as SIGUSR1 -> exit 5 -> qrerun JOBID; the rerun (same JOBID)
#     adds --resume; with qrerun refused, a copy is submitted with qsub -v ATTNBATCH_JOB_RESUME=1
# What this cannot show: a real PBS server's directives, array scheduling and dependencies.
set -uo pipefail
# shellcheck source=tests/jobs/lib.sh
source "$(dirname "$0")/lib.sh"
[ $# = 3 ] || die "usage: $0 one_node|select2 ATTNBATCH WORKDIR"
mode=$1 BIN=$(realpath "$2") WORK=$3
case $mode in one_node|select2) ;; *) die "unknown case '$mode'" ;; esac
[ "$mode" = select2 ] && slurm_env   # the rig's Open MPI settings; exit 77 without the rig
rm -rf "$WORK"
mkdir -p "$WORK/bin" || die "cannot make $WORK"
cd "$WORK" || die "cannot enter $WORK"
WORK=$PWD
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ "$mode" = one_node ] && export OMPI_MCA_btl=self,vader
for v in $(compgen -e | grep -E '^(PBS_|SBATCH_)|^SLURM_' | grep -vx SLURM_CONF); do unset "$v"; done
t0=$SECONDS

# Stubs: qrerun succeeds unless QRERUN_FAILS=1; qsub prints a job id. Both log their arguments.
# A rerun ends the running job, so qrerun first sends SIGTERM to itself and to the job shell
# that called it, then answers, as a PBS server's answer may come after the MOM's SIGTERM.
cat >bin/qrerun <<'EOF'
#!/bin/sh
echo "qrerun $*" >>"$STUB_LOG"
[ "${QRERUN_FAILS:-0}" = 1 ] && exit 1
kill -TERM $$ "$PPID"
sleep 0.2
exit 0
EOF
cat >bin/qsub <<'EOF'
#!/bin/sh
echo "qsub $*" >>"$STUB_LOG"
echo 99.sim
EOF
chmod +x bin/qrerun bin/qsub
export STUB_LOG=$WORK/stub.log PATH=$WORK/bin:$PATH
printf 'localhost\n' >nodefile1

pbs() {  # pbs JOBID SCRIPT [args]: the script as PBS would run it, from a copy, in WORK
    local job=$1 script=$2
    shift 2
    cp "$REPO/jobs/pbs/$script" "$WORK/spool-$script"
    # exec: in `pbs ... &` the background pid is then the job shell itself (signals reach it).
    (exec env PBS_O_WORKDIR="$WORK" PBS_NODEFILE="$WORK/nodefile1" PBS_JOBID="$job" OMP_NUM_THREADS=2 \
        ATTNBATCH_REPO="$REPO" bash "$WORK/spool-$script" "$@")
}

"$BIN" generate --output in.h5 --num-seqs 9 --seq-len 40 --dim 16 --heads 2 --min-len 3 --seed 2 >/dev/null || die "generate failed"

if [ "$mode" = select2 ]; then
    # select=2:ncpus=2:mpiprocs=2:ompthreads=1: PBS_NODEFILE has one line per MPI process.
    printf 'node1\nnode1\nnode2\nnode2\n' >nodefile2
    on_node1() {  # on_node1 JOBID SCRIPT [args]: the script as node1's mom would run it
        local job=$1 script=$2
        shift 2
        cp "$REPO/jobs/pbs/$script" "$WORK/spool-$script"
        bash "$RIG" exec node1 env PBS_O_WORKDIR="$WORK" PBS_NODEFILE="$WORK/nodefile2" PBS_JOBID="$job" \
            OMP_NUM_THREADS=1 ATTNBATCH_REPO="$REPO" bash "$WORK/spool-$script" "$@"
    }
    # shellcheck disable=SC2317  # called through check
    two_nodes() {  # two_nodes REPORT: 2 nodes (node1, node2) x 2 ranks
        /usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert (r["nodes"], r["ranks_per_node"], r["node_names"]) == (2, [2, 2], ["node1", "node2"]), r
assert r["messaging"]["transports"] == ["tcp", "vader"], r["messaging"]' "$1"
    }
    rc=0
    ATTNBATCH=$BIN on_node1 21.sim attnbatch.pbs --input in.h5 --output out1.h5 --heads 2 --report report1.json >run1.log 2>&1 || rc=$?
    check "attnbatch.pbs on select=2 exits 0" test $rc = 0
    check "4 ranks (PBS_NODEFILE) x 1 thread via mpirun" grep -q '4 rank(s) x 1 thread(s) via mpirun' run1.log
    check "the report says node1 and node2 x 2 ranks over tcp + vader" two_nodes report1.json
    check "out1.h5 verifies" "$BIN" verify --input in.h5 --output out1.h5 --samples all
    [ "$failures" = 0 ] || show_log run1.log

    /usr/bin/python3 "$REPO/jobs/tools/split_shards.py" in.h5 2 shards >/dev/null || die "split_shards.py failed"
    rc=0
    ATTNBATCH=$BIN PBS_ARRAY_INDEX=1 ATTNBATCH_SHARD_LIST=shards/shards.txt ATTNBATCH_SHARD_OUTDIR=results \
        ATTNBATCH_RUN_ARGS="--heads 2" on_node1 "22[1].sim" attnbatch-array.pbs >array.log 2>&1 || rc=$?
    check "array sub-job 1 on select=2 exits 0" test $rc = 0
    check "its shard ran on node1 and node2 x 2 ranks" two_nodes results/in.shard-1.report.json
    check "its shard verifies" "$BIN" verify --input in.h5 --output results/in.shard-1.out.h5 --samples all
    [ "$failures" = 0 ] || show_log array.log

    # node2 lost mid-run: mpirun's own exit code, taken as a lost node -> exit 5 and qrerun.
    # About 6 s of the fp64 reference kernel on the host's two cores (lib.sh says why a time).
    "$BIN" generate --output long.h5 --num-seqs "$(reference_sequences 6 2)" --seq-len 256 --dim 64 --heads 4 --seed 9 >/dev/null || die "generate failed"
    : >"$STUB_LOG"
    rc=0
    ATTNBATCH=$BIN on_node1 23.sim attnbatch.pbs --input long.h5 --output lost.h5 --heads 4 --kernel reference \
        --save-weights none --unit-sequences 4 --progress auto --progress-interval 0.5 >lost.log 2>&1 &
    job_pid=$!
    for _ in $(seq 1 300); do grep -q '^progress:' lost.log && break; sleep 0.1; done
    bash "$RIG" kill-node node2
    wait "$job_pid" || rc=$?
    code=$(sed -n 's/^attnbatch.pbs: attnbatch exited with \([0-9]*\)$/\1/p' lost.log | head -n1)
    note "node2 lost: mpirun exited ${code:-?}, the script $rc"
    check "node2 lost: mpirun's code (${code:-none}) above 5 taken as a lost node, exit 5" \
        test "$rc" = 5 -a "${code:-0}" -gt 5
    check "qrerun 23.sim called" grep -qx 'qrerun 23.sim' "$STUB_LOG"
    check "a resumable lost.h5.partial, no lost.h5" test -e lost.h5.partial -a ! -e lost.h5
    bash "$RIG" revive node2 || fail "revive node2"
    rc=0
    ATTNBATCH=$BIN on_node1 23.sim attnbatch.pbs --input long.h5 --output lost.h5 --heads 4 --kernel reference \
        --save-weights none --unit-sequences 4 >rerun.log 2>&1 || rc=$?
    check "the rerun (same job id) resumed on node1 and node2 and finished" \
        test $rc = 0 -a -n "$(grep -E 'run .* --resume$' rerun.log)" -a -f lost.h5
    check "lost.h5 verifies" "$BIN" verify --input long.h5 --output lost.h5 --samples 8
    [ "$failures" = 0 ] || { show_log lost.log; show_log rerun.log; }
    note "pbs select=2 simulation took $((SECONDS - t0)) s"
    finish
fi

# 1. one run, options as arguments
rc=0
ATTNBATCH=$BIN pbs 1.sim attnbatch.pbs --input in.h5 --output out1.h5 --heads 2 >run1.log 2>&1 || rc=$?
check "attnbatch.pbs exits 0" test $rc = 0
check "1 rank (PBS_NODEFILE) x 2 threads (OMP_NUM_THREADS) via mpirun" grep -q '1 rank(s) x 2 thread(s) via mpirun' run1.log
check "PERFORMANCE ranks=1 threads=2" grep -qE '^PERFORMANCE ranks=1 threads=2 sequences=9 ' run1.log
check "out1.h5 verifies" "$BIN" verify --input in.h5 --output out1.h5 --samples all
[ "$failures" = 0 ] || show_log run1.log

# 2. options in ATTNBATCH_RUN_ARGS (qsub -v), binary found through ATTNBATCH_REPO... or ATTNBATCH
rc=0
ATTNBATCH=$BIN ATTNBATCH_RUN_ARGS="--input in.h5 --output out2.h5 --heads 2 --causal" pbs 2.sim attnbatch.pbs >run2.log 2>&1 || rc=$?
check "attnbatch.pbs with ATTNBATCH_RUN_ARGS exits 0" test $rc = 0
check "out2.h5 (causal) verifies" "$BIN" verify --input in.h5 --output out2.h5 --samples all

# 3. array sub-jobs and the verify job
/usr/bin/python3 "$REPO/jobs/tools/split_shards.py" in.h5 3 shards >/dev/null || die "split_shards.py failed"
for i in 0 1 2; do
    rc=0
    ATTNBATCH=$BIN PBS_ARRAY_INDEX=$i ATTNBATCH_SHARD_LIST=shards/shards.txt ATTNBATCH_SHARD_OUTDIR=results \
        ATTNBATCH_RUN_ARGS="--heads 2 --save-weights none" pbs "3[$i].sim" attnbatch-array.pbs >"array$i.log" 2>&1 || rc=$?
    check "array sub-job $i exits 0" test $rc = 0
done
rc=0
ATTNBATCH=$BIN ATTNBATCH_SHARD_LIST=shards/shards.txt ATTNBATCH_SHARD_OUTDIR=results ATTNBATCH_VERIFY_ARGS="--samples all" \
    pbs 4.sim verify-shards.pbs >verify.log 2>&1 || rc=$?
check "verify-shards.pbs: 3 of 3 shards verified" grep -q 'verify-shards: 3 of 3 shards verified' verify.log
check "verify-shards.pbs exits 0" test $rc = 0
check "each sub-job ran its block (--sequences) into NAME.shard-i.out.h5" \
    test -f results/in.shard-0.out.h5 -a -f results/in.shard-1.out.h5 -a -f results/in.shard-2.out.h5
check "shard 2 records its first sequence (6 of 9)" \
    /usr/bin/python3 -c 'import h5py, sys; sys.exit(int(h5py.File(sys.argv[1], "r").attrs["first_sequence"]) != 6)' results/in.shard-2.out.h5
# Lists of shard files (split_shards.py --files, or written by hand) still work.
/usr/bin/python3 "$REPO/jobs/tools/split_shards.py" in.h5 2 shard-files --files >/dev/null || die "split_shards.py --files failed"
rc=0
ATTNBATCH=$BIN PBS_ARRAY_INDEX=1 ATTNBATCH_SHARD_LIST=shard-files/shards.txt ATTNBATCH_SHARD_OUTDIR=file-results \
    ATTNBATCH_RUN_ARGS="--heads 2" pbs "5[1].sim" attnbatch-array.pbs >files.log 2>&1 || rc=$?
check "a sub-job over a shard file exits 0 and writes NAME.out.h5" test $rc = 0 -a -f file-results/in.shard-1.out.h5

# 4. submit-shards.sh (PBS): the array and the afterok dependency it asks qsub for
: >"$STUB_LOG"
out=$(bash "$REPO/jobs/pbs/submit-shards.sh" shards/shards.txt results --heads 2) || fail "submit-shards.sh failed: $out"
check "submit-shards.sh: qsub -J 0-2 for the array" grep -q '^qsub -J 0-2 -v .*ATTNBATCH_RUN_ARGS=--heads 2 .*attnbatch-array.pbs$' "$STUB_LOG"
check "submit-shards.sh: the verify job depends on it (afterok)" grep -q '^qsub -W depend=afterok:99.sim -v .*verify-shards.pbs$' "$STUB_LOG"

# 5. exit 5 -> qrerun; the rerun resumes
run_signalled() {  # run_signalled JOBID LOG: start, wait for the stand-in, SIGTERM the shell
    local job=$1 log=$2 pid
    rm -f STARTED.*
    cp "$REPO/jobs/pbs/attnbatch.pbs" "$WORK/spool-attnbatch.pbs"
    (exec env PBS_O_WORKDIR="$WORK" PBS_NODEFILE="$WORK/nodefile1" PBS_JOBID="$job" OMP_NUM_THREADS=2 \
        ATTNBATCH_REPO="$REPO" ATTNBATCH="$REPO/tests/jobs/fake_attnbatch.py" \
        bash "$WORK/spool-attnbatch.pbs" --output "$WORK/fake.out") >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do [ -e STARTED.0 ] && break; sleep 0.1; done
    kill -TERM "$pid"
    wait "$pid"
}
: >"$STUB_LOG"
rc=0
run_signalled 5.sim exit5.log || rc=$?
check "SIGTERM forwarded to mpirun as SIGUSR1, exit 5" test $rc = 5
check "qrerun 5.sim called" grep -qx 'qrerun 5.sim' "$STUB_LOG"
check "qrerun answered although the rerun's SIGTERM came first: no second copy submitted" \
    test "$(grep -c '^qsub' "$STUB_LOG")" = 0
check "checkpoint marker left for the rerun" test -e "$WORK/.attnbatch-checkpointed.5.sim"
rc=0
ATTNBATCH=$REPO/tests/jobs/fake_attnbatch.py pbs 5.sim attnbatch.pbs --output "$WORK/fake.out" >rerun.log 2>&1 || rc=$?
check "the rerun (same job id) added --resume and finished" grep -qE 'run --output .*/fake.out --resume$' rerun.log
check "the rerun exits 0 and removes the marker" test $rc = 0 -a ! -e "$WORK/.attnbatch-checkpointed.5.sim"
: >"$STUB_LOG"
rc=0
QRERUN_FAILS=1 run_signalled 6.sim exit5b.log || rc=$?
check "qrerun refused -> qsub -v ATTNBATCH_JOB_RESUME=1 of attnbatch.pbs" \
    grep -qE '^qsub -v ATTNBATCH_JOB_RESUME=1,.*ATTNBATCH_RUN_ARGS=--output .*/fake.out .*jobs/pbs/attnbatch.pbs$' "$STUB_LOG"
[ "$failures" = 0 ] || { show_log exit5.log; show_log rerun.log; show_log exit5b.log; show_log "$STUB_LOG"; }
note "pbs simulation took $((SECONDS - t0)) s"
finish
