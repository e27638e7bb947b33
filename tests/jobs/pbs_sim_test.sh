#!/usr/bin/env bash
# pbs_sim_test.sh ATTNBATCH WORKDIR - runs the jobs/pbs scripts the way a PBS mom would
# (bash on a copy of the script, in a fake job environment: PBS_O_WORKDIR, PBS_NODEFILE,
# PBS_JOBID, PBS_ARRAY_INDEX, OMP_NUM_THREADS as PBS Pro sets it from ompthreads), because no
# PBS server can run here. qsub/qrerun are stubs that record their arguments. Checks:
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
[ $# = 2 ] || die "usage: $0 ATTNBATCH WORKDIR"
BIN=$(realpath "$1") WORK=$2
rm -rf "$WORK"
mkdir -p "$WORK/bin" || die "cannot make $WORK"
cd "$WORK" || die "cannot enter $WORK"
WORK=$PWD
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
for v in $(compgen -e | grep -E '^(PBS_|SLURM_|SBATCH_)'); do unset "$v"; done
t0=$SECONDS

# Stubs: qrerun succeeds unless QRERUN_FAILS=1; qsub prints a job id. Both log their arguments.
cat >bin/qrerun <<'EOF'
#!/bin/sh
echo "qrerun $*" >>"$STUB_LOG"
[ "${QRERUN_FAILS:-0}" = 1 ] && exit 1
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
        ATTNBATCH_REPO="$REPO" ATTNBATCH="$REPO/tests/jobs/fake_attnbatch.sh" \
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
check "checkpoint marker left for the rerun" test -e "$WORK/.attnbatch-checkpointed.5.sim"
rc=0
ATTNBATCH=$REPO/tests/jobs/fake_attnbatch.sh pbs 5.sim attnbatch.pbs --output "$WORK/fake.out" >rerun.log 2>&1 || rc=$?
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
