#!/usr/bin/env bash
# slurm_jobs_test.sh CASE ATTNBATCH WORKDIR - submits the jobs/slurm scripts to the real
# Slurm of the multi-node rig (tests/cluster/local-cluster.sh, started by the ctest fixture
# multinode.cluster_up) on a small generated dataset, waits for them and checks exit codes
# (local-cluster.sh wait + scontrol show job: sacct needs slurmdbd, which the rig leaves
# out), logs, and `attnbatch verify`. Exit 77 (skipped) where the rig cannot run.
#
# Cases (each one ctest test, see CMakeLists.txt):
#   srun          -n 1 -c 2, launcher srun --mpi=pmix: COMPLETED 0:0, OMP_NUM_THREADS from -c,
#                 PERFORMANCE line, --report JSON, output verifies (all sequences), no .partial
#   mpirun        the same through the mpirun fallback (ATTNBATCH_LAUNCHER=mpirun)
#   config        generate/run/verify from jobs/config/small-test.ini (--config)
#   find_binary   without ATTNBATCH or PATH, REPO/build/attnbatch is found upwards from the
#                 submit directory; a wrong ATTNBATCH is exit 2 with a message
#   exit_code     a corrupt input: the job ends FAILED with attnbatch's own exit code, is not
#                 requeued and leaves no output
#   array         split_shards.py (3 blocks of one file, --sequences) -> submit-shards.sh: 3 array
#                 tasks + a verify job with --dependency=afterok; everything COMPLETED and every
#                 shard verifies
#   array_failure a NaN in one block: only its task fails, the other shards are written, and
#                 the verify job never runs (afterok unsatisfied -> cancelled)
#   requeue       the exit-5 protocol with a stand-in binary (fake_attnbatch.py) on 2 tasks:
#                 scancel --signal=USR1 --batch -> the shell forwards it through srun to both
#                 tasks -> exit 5 -> scontrol requeue -> the restart adds --resume -> COMPLETED;
#                 scontrol's answer to the requeue comes after the job's SIGTERM (a wrapper)
#   multi_rank    -n 2 -c 1 with the real binary: verifies, PERFORMANCE ranks=2
#   preempt       the exit-5 protocol with the real binary on 2 ranks, twice: USR1 in start-up
#                 (sent as soon as the job runs, before its ranks exist) and USR1 mid-run of the
#                 restart, each -> one line naming the phase, exit 5 -> requeue -> --resume;
#                 then a complete output that verifies and is byte-identical (cmp) to an
#                 uninterrupted run
#   preempt_1rank the same on 1 rank
#   preempt_term  a job on 2 nodes x 1 rank (label multinode): SIGTERM to the step's tasks
#                 directly (scancel --signal=TERM, srun): the ranks stop themselves (exit 5)
#                 -> requeue -> complete, byte-identical
#   preempt_term_mpirun
#                 SIGTERM to every process of the job (--full), launcher mpirun: mpirun ends
#                 the ranks itself (exit 1), which the script takes as interrupted after the
#                 signal (exit 5) -> requeue -> complete, byte-identical
# On two nodes and more (ctest label multinode):
#   multinode     sbatch -N 2 --ntasks-per-node 2 --cpus-per-task 1 via srun and via mpirun:
#                 COMPLETED, 4 ranks, the report names the job's 2 nodes x 2 ranks and ob1
#                 chosen by Open MPI over tcp + vader; verifies; srun and mpirun agree bytewise
#   multinode_array  submit-shards.sh --nodes 2 --tasks-per-node 1: 3 tasks of 2 nodes each,
#                 the verify job after them, every shard's report says 2 nodes x 1 rank
#   multinode_node_lost, multinode_node_lost_srun
#                 every process of the job's second node SIGKILLed mid-run: requeued (mpirun:
#                 its own exit code, above 5, taken as a lost node by the script; srun: Slurm
#                 requeues on the node's failure), the restart runs on other nodes with
#                 --resume, byte-identical to an uninterrupted run
set -uo pipefail
# shellcheck source=tests/jobs/lib.sh
source "$(dirname "$0")/lib.sh"

[ $# = 3 ] || die "usage: $0 CASE ATTNBATCH WORKDIR"
case_name=$1 BIN=$(realpath "$2") WORK=$3
[ -x "$BIN" ] || die "$BIN is not executable"
slurm_env
rm -rf "$WORK"
mkdir -p "$WORK" || die "cannot make $WORK"
cd "$WORK" || die "cannot enter $WORK"
WORK=$PWD
export ATTNBATCH=$BIN
# Pins the creation time every output records (and sbatch passes the environment on), so
# that an interrupted job and an uninterrupted run can be compared byte for byte.
export SOURCE_DATE_EPOCH=1767225600
SBATCH=$REPO/jobs/slurm/attnbatch.sbatch
t0=$SECONDS

generate() {  # generate FILE [generate options]
    local f=$1
    shift
    "$BIN" generate --output "$f" "$@" >/dev/null || die "attnbatch generate $f failed"
}

# expect_completed JOB LOG: exit 0, COMPLETED, ExitCode=0:0
expect_completed() {
    local job=$1 log=$2 rc=0
    wait_job "$job" 120 || rc=$?
    if [ "$rc" = 0 ] && [ "$(job_field "$job" JobState)" = COMPLETED ] && [ "$(job_field "$job" ExitCode)" = 0:0 ]; then
        ok "job $job COMPLETED, ExitCode=0:0"
    else
        fail "job $job: wait rc=$rc JobState=$(job_field "$job" JobState) ExitCode=$(job_field "$job" ExitCode)"
        show_log "$log"
        return 1
    fi
}

# job_ended JOB: the job is over for good (so waiting for a requeue is pointless).
job_ended() {
    case $(job_field "$1" JobState) in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE) return 0 ;; esac
    return 1
}

# release_requeued JOB: start a requeued job now instead of after Slurm's ~2-minute hold. Not
# at once: slurmd refuses a launch whose credential is from the second in which the old
# incarnation was killed ("Job credential revoked"), and srun --mpi=pmix fails while the old
# step's socket is still in the spool directory.
release_requeued() {
    local spool=$ATTNBATCH_CLUSTER_DIR/spool
    for _ in $(seq 1 60); do compgen -G "$spool/*/*.$1.*" >/dev/null || break; sleep 0.25; done
    sleep 2
    # (A job that started meanwhile, as after a node was set DOWN, needs no release.)
    scontrol update JobId="$1" StartTime=now 2>/dev/null || [ "$(job_field "$1" JobState)" != PENDING ] ||
        fail "scontrol update JobId=$1 StartTime=now"
}

verify_all() {  # verify_all INPUT OUTPUT [options]
    local in=$1 out=$2
    shift 2
    if "$BIN" verify --input "$in" --output "$out" --samples all "$@" >verify.log 2>&1; then
        ok "attnbatch verify --samples all: $(grep -o 'OK.*' verify.log | head -n1)"
    else
        fail "attnbatch verify $out"
        cat verify.log
    fi
}

single_rank() {  # single_rank LAUNCHER
    local launcher=$1 job log
    generate in.h5 --num-seqs 10 --seq-len 48 --dim 32 --heads 2 --min-len 5 --seed 3
    job=$(ATTNBATCH_LAUNCHER=$launcher sbatch --parsable -n 1 -c 2 -t 5 -o "$WORK/job-%j.out" "$SBATCH" \
        --input in.h5 --output out.h5 --heads 2 --causal --report report.json) || die "sbatch failed"
    log=$WORK/job-$job.out
    expect_completed "$job" "$log" || return
    check "the launcher is $launcher" grep -q "1 rank(s) x 2 thread(s) via $launcher" "$log"
    check "PERFORMANCE ranks=1 threads=2 (OMP_NUM_THREADS from --cpus-per-task)" \
        grep -qE '^PERFORMANCE ranks=1 threads=2 sequences=10 ' "$log"
    check "--report JSON has per-rank read/compute/write times" \
        /usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); p=r["per_rank"][0]; [p[k] for k in ("read","compute","write")]' report.json
    check "out.h5 written, no out.h5.partial left" test -f out.h5 -a ! -e out.h5.partial
    verify_all in.h5 out.h5
}

case $case_name in
srun) single_rank srun ;;
mpirun) single_rank mpirun ;;

config)
    cp "$REPO/jobs/config/small-test.ini" job.ini
    "$BIN" generate --config job.ini >/dev/null || die "generate --config job.ini failed"
    job=$(sbatch --parsable -n 1 -c 2 -t 5 -o "$WORK/job-%j.out" "$SBATCH" --config job.ini) || die "sbatch failed"
    expect_completed "$job" "$WORK/job-$job.out" || finish
    check "the run took its options from the INI file (causal, mean, f16, report)" \
        /usr/bin/python3 -c '
import h5py, json, sys
f = h5py.File("small-out.h5", "r")
assert f["attention"].shape[1] == 1 and f["attention"].dtype == "float16", f["attention"]
assert int(f.attrs["causal"]) == 1
json.load(open("small-report.json"))'
    if "$BIN" verify --config job.ini >verify.log 2>&1; then ok "attnbatch verify --config job.ini"; else fail "verify --config job.ini"; cat verify.log; fi
    ;;

find_binary)
    # Neither ATTNBATCH nor PATH: the job script (run from Slurm's spool copy) must find
    # REPO/build/attnbatch upwards from the submit directory.
    unset ATTNBATCH
    command -v attnbatch >/dev/null && die "an attnbatch on PATH ($(command -v attnbatch)) would hide the repository lookup"
    mkdir -p repo/jobs/slurm repo/build repo/work/deeper
    cp "$SBATCH" repo/jobs/slurm/
    ln -s "$BIN" repo/build/attnbatch
    generate repo/work/deeper/in.h5 --num-seqs 4 --seq-len 16 --dim 8
    job=$(cd repo/work/deeper && sbatch --parsable -n 1 -c 1 -t 5 -o "$WORK/job-%j.out" "$WORK/repo/jobs/slurm/attnbatch.sbatch" \
        --input in.h5 --output out.h5) || die "sbatch failed"
    expect_completed "$job" "$WORK/job-$job.out" || finish
    check "found $WORK/repo/build/attnbatch from the submit directory" grep -q "^attnbatch.sbatch: $WORK/repo/build/attnbatch run " "$WORK/job-$job.out"
    check "relative paths are relative to the submit directory" test -f repo/work/deeper/out.h5
    job=$(cd / && ATTNBATCH=/nonexistent sbatch --parsable -n 1 -c 1 -t 5 -o "$WORK/job-%j.out" "$SBATCH" --input x --output y) || die "sbatch failed"
    rc=0
    wait_job "$job" 60 >/dev/null || rc=$?
    check "ATTNBATCH pointing nowhere: exit 2 and a message naming it" \
        test "$rc" = 2 -a -n "$(grep 'ATTNBATCH=/nonexistent is not an executable' "$WORK/job-$job.out")"
    ;;

exit_code)
    # The exit codes compared here are attnbatch's only if LeakSanitizer does not replace them:
    # it checks for leaks at exit by tracing the process's threads (ptrace), and where it
    # cannot (seen on a fresh machine in this case: "LeakSanitizer has encountered a fatal
    # error", exit 1) it ends the process with 1. So in the sanitizer build this case goes
    # without leak checking, visibly and only here (ASan's other checks stay on; the variable
    # means nothing to other builds, and sbatch passes it to the job).
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
    head -c 4096 /dev/urandom >corrupt.h5
    expected=0
    "$BIN" run --input corrupt.h5 --output direct.h5 >/dev/null 2>&1 || expected=$?
    [ "$expected" -ne 0 ] || die "attnbatch run accepted a corrupt input"
    job=$(sbatch --parsable -n 1 -c 1 -t 5 -o "$WORK/job-%j.out" "$SBATCH" --input corrupt.h5 --output out.h5) || die "sbatch failed"
    rc=0
    wait_job "$job" 120 || rc=$?
    check "sbatch job exit code $rc = attnbatch's own exit code $expected" test "$rc" = "$expected"
    check "JobState=FAILED ExitCode=$expected:0" test "$(job_field "$job" JobState) $(job_field "$job" ExitCode)" = "FAILED $expected:0"
    check "not requeued (Restarts=0)" test "$(job_field "$job" Restarts)" = 0
    check "no out.h5 or out.h5.partial left" test ! -e out.h5 -a ! -e out.h5.partial
    [ "$failures" = 0 ] || show_log "$WORK/job-$job.out"
    ;;

array|array_failure|multinode_array)
    # multinode_array: every array task on 2 nodes x 1 rank (submit-shards.sh --nodes).
    shape=()
    [ "$case_name" = multinode_array ] && shape=(--nodes 2 --tasks-per-node 1)
    generate all.h5 --num-seqs 12 --seq-len 40 --dim 16 --heads 2 --min-len 4 --seed 11
    /usr/bin/python3 "$REPO/jobs/tools/split_shards.py" all.h5 3 shards >split.log || die "split_shards.py failed"
    check "split_shards.py listed 3 blocks of all.h5, half-open" test "$(cat shards/shards.txt)" = "$(printf '0:4 %s\n4:8 %s\n8:12 %s' "$WORK/all.h5" "$WORK/all.h5" "$WORK/all.h5")"
    check "split_shards.py prints them half-open" grep -q 'shard 1: sequences \[4, 8) of all.h5' split.log
    if [ "$case_name" = array_failure ]; then
        # A NaN in sequence 5: only shard 1 ([4, 8)) reads it.
        /usr/bin/python3 -c 'import h5py, sys; f = h5py.File(sys.argv[1], "r+"); f["embeddings"][5, 0, 0] = float("nan")' all.h5 ||
            die "cannot put a NaN into all.h5"
    fi
    out=$(cd "$WORK" && bash "$REPO/jobs/slurm/submit-shards.sh" "${shape[@]}" --samples all shards/shards.txt results \
        --heads 2 --save-weights mean) || die "submit-shards.sh failed: $out"
    note "$out"
    array=$(sed -n 's/^array=\([0-9]*\) .*/\1/p' <<<"$out")
    verify=$(sed -n 's/.* verify=\([0-9]*\)$/\1/p' <<<"$out")
    if [ -z "$array" ] || [ -z "$verify" ]; then die "submit-shards.sh printed '$out'"; fi
    check "the verify job depends on the array with afterok" bash -c "scontrol -o show job $verify | grep -q 'Dependency=afterok:${array}_\*'"
    if [ "$case_name" != array_failure ]; then
        expect_completed "$verify" "$WORK/attnbatch-verify-$verify.out"
        rc=0
        states=$(wait_job "$array" 30) || rc=$?
        echo "$states"
        check "3 array tasks, all COMPLETED with ExitCode=0:0" test "$(grep -c 'JobState=COMPLETED ExitCode=0:0' <<<"$states")" = 3
        check "the verify job says 3 of 3 shards verified" grep -q 'verify-shards: 3 of 3 shards verified' "$WORK/attnbatch-verify-$verify.out"
        check "per-shard reports written" test "$(find results -name '*.report.json' | wc -l)" = 3
        [ "$case_name" = multinode_array ] && check "every shard ran on 2 nodes x 1 rank (its report)" /usr/bin/python3 -c '
import glob, json
for path in glob.glob("results/*.report.json"):
    r = json.load(open(path))
    assert r["nodes"] == 2 and r["ranks_per_node"] == [1, 1], (path, r["nodes"], r["ranks_per_node"])'
    else
        rc=0
        states=$(wait_job "$array" 120) || rc=$?
        echo "$states"
        check "exactly one array task failed (shard 1)" test "$(grep -c 'JobState=FAILED' <<<"$states")" = 1
        check "the other two tasks COMPLETED (shards are isolated)" test "$(grep -c 'JobState=COMPLETED ExitCode=0:0' <<<"$states")" = 2
        check "shards 0 and 2 written, shard 1 not" test -f results/all.shard-0.out.h5 -a -f results/all.shard-2.out.h5 -a ! -e results/all.shard-1.out.h5
        # --kill-on-invalid-dep=yes: the verify job is cancelled instead of pending forever.
        for _ in $(seq 1 40); do
            st=$(job_field "$verify" JobState)
            [ "$st" = PENDING ] || break
            sleep 0.25
        done
        check "the verify job never ran (afterok unsatisfied): JobState=$st Reason=$(job_field "$verify" Reason)" \
            test "$st" = CANCELLED -a ! -e "$WORK/attnbatch-verify-$verify.out"
        scancel "$verify" 2>/dev/null || true
    fi
    ;;

requeue|requeue_term_mpirun)
    # The stand-in exits 5 on SIGUSR1/SIGTERM and finishes only when it is given --resume.
    export ATTNBATCH=$REPO/tests/jobs/fake_attnbatch.py
    sig=USR1 launcher=srun
    [ "$case_name" = requeue_term_mpirun ] && sig=TERM launcher=mpirun
    export ATTNBATCH_LAUNCHER=$launcher
    # `scontrol requeue` ends the job it is run from, and its answer may come after Slurm has
    # sent the job's processes SIGTERM: this scontrol (first on the job's PATH) answers 2 s
    # late every time, so a script that lets it die of the signal reports a failed requeue.
    mkdir -p late-answer
    real_scontrol=$(command -v scontrol)
    cat >late-answer/scontrol <<EOF
#!/bin/bash
if [ "\${1:-}" = requeue ]; then "$real_scontrol" "\$@"; rc=\$?; sleep 2; exit \$rc; fi
exec "$real_scontrol" "\$@"
EOF
    chmod +x late-answer/scontrol
    job=$(PATH=$WORK/late-answer:$PATH sbatch --parsable -n 2 -c 1 -t 5 -o "$WORK/job-%j.out" "$SBATCH" --output "$WORK/result.txt") ||
        die "sbatch failed"
    log=$WORK/job-$job.out
    for _ in $(seq 1 100); do [ -e STARTED.0 ] && [ -e STARTED.1 ] && break; sleep 0.2; done
    check "both tasks started" test -e STARTED.0 -a -e STARTED.1
    scancel --signal="$sig" --batch "$job"
    # After `scontrol requeue` Slurm holds the job for ~2 minutes (EligibleTime); the test
    # releases it early (release_requeued), so it takes seconds.
    requeued=0
    for _ in $(seq 1 120); do
        if [ "$(job_field "$job" Restarts)" = 1 ] && [ "$(job_field "$job" JobState)" = PENDING ]; then requeued=1; break; fi
        job_ended "$job" && break
        sleep 0.25
    done
    check "the job was requeued (Restarts=1, PENDING)" test $requeued = 1
    release_requeued "$job"
    expect_completed "$job" "$log"
    check "the shell forwarded SIG$sig to $launcher as SIGUSR1" grep -q "SIG$sig at .*SIGUSR1 to $launcher" "$log"
    if [ "$launcher" = srun ]; then
        check "both tasks checkpointed and exited 5" test "$(grep -o 'SIGUSR1 -> checkpoint written, exit 5' "$log" | wc -l)" = 2
    else
        # mpirun ends the other ranks as soon as one exits non-zero, so the second one may not
        # get to say so: the forwarding itself is what is checked here.
        check "mpirun forwarded SIGUSR1 to the ranks" grep -q 'mpirun: Forwarding signal 10 to job' "$log"
        check "a rank checkpointed and exited 5" grep -q 'SIGUSR1 -> checkpoint written, exit 5' "$log"
    fi
    check "exit 5 led to scontrol requeue" grep -q "job $job requeued, it continues with --resume" "$log"
    check "the restart (restart 1) ran with --resume" grep -qE "^attnbatch.sbatch: .*run --output $WORK/result.txt --resume$" "$log"
    check "both tasks resumed and finished" test "$(grep -o 'resumed, finishing' "$log" | wc -l)" = 2
    check "Restarts=1 after completion" test "$(job_field "$job" Restarts)" = 1
    check "the log was appended to across the restart (--open-mode=append)" test "$(grep -c 'restart [01] on' "$log")" = 2
    [ "$failures" = 0 ] || show_log "$log"
    ;;

multi_rank)
    generate in.h5 --num-seqs 16 --seq-len 48 --dim 32 --heads 2 --min-len 5 --seed 5
    job=$(sbatch --parsable -n 2 -c 1 -t 5 -o "$WORK/job-%j.out" "$SBATCH" \
        --input in.h5 --output out.h5 --heads 2 --report report.json) || die "sbatch failed"
    expect_completed "$job" "$WORK/job-$job.out" || finish
    check "PERFORMANCE ranks=2 threads=1" grep -qE '^PERFORMANCE ranks=2 threads=1 sequences=16 ' "$WORK/job-$job.out"
    check "--report JSON has 2 ranks with communicate/idle times" \
        /usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert len(r["per_rank"]) == 2; [p[k] for p in r["per_rank"] for k in ("read","compute","communicate","write","idle")]' report.json
    verify_all in.h5 out.h5
    ;;

preempt|preempt_1rank)
    ranks=2
    [ "$case_name" = preempt_1rank ] && ranks=1
    # About 7 s of the fp64 reference kernel on the job's ranks: long enough to be interrupted
    # twice, in start-up and mid-run.
    generate in.h5 --num-seqs "$(reference_sequences 7 "$ranks")" --seq-len 256 --dim 64 --heads 4 --seed 9
    options=(--heads 4 --kernel reference --save-weights none --unit-sequences 4 --progress auto --progress-interval 0.5)
    job=$(sbatch --parsable -n "$ranks" -c 1 -t 10 -o "$WORK/job-%j.out" "$SBATCH" --input in.h5 --output out.h5 \
        "${options[@]}") || die "sbatch failed"
    log=$WORK/job-$job.out

    # preempt_at RESTART WHAT: SIGUSR1 to the batch shell, as Slurm's --signal=B:USR1 does;
    # then the job must exit 5 and be requeued (Restarts=RESTART+1, PENDING), and is released.
    preempt_at() {
        local restart=$1 what=$2 requeued=0 line
        scancel --signal=USR1 --batch "$job" || fail "scancel --signal=USR1 --batch $job ($what)"
        note "SIGUSR1 sent $what"
        for _ in $(seq 1 240); do
            if [ "$(job_field "$job" Restarts)" = $((restart + 1)) ] && [ "$(job_field "$job" JobState)" = PENDING ]; then
                requeued=1
                break
            fi
            job_ended "$job" && break
            sleep 0.25
        done
        check "SIGUSR1 $what: exit 5 and requeue (Restarts=$((restart + 1)), PENDING)" test $requeued = 1
        [ $requeued = 1 ] || { show_log "$log"; finish; }
        check "SIGUSR1 $what: attnbatch exited 5 after SIGUSR1" \
            test "$(grep -c 'attnbatch exited with 5 after SIGUSR1' "$log")" = $((restart + 1))
        line=$(grep 'interrupted by SIGUSR1 during' "$log" | tail -n1)
        check "SIGUSR1 $what: one line names the phase: ${line#*error: }" \
            test "$(grep -c 'interrupted by SIGUSR1 during .* sequences were written; resume with --resume' "$log")" = $((restart + 1))
        # Stopped before it created out.h5.partial, an attempt leaves none.
        if [ "$what" = mid-run ]; then
            check "SIGUSR1 $what: a resumable out.h5.partial, no out.h5" test -e out.h5.partial -a ! -e out.h5
        else
            check "SIGUSR1 $what: no out.h5" test ! -e out.h5
        fi
        release_requeued "$job"
    }

    # 1. During start-up: as soon as the job script has begun (its first line), before the
    #    launcher has started the ranks (the shell keeps the signal until the launcher exists).
    for _ in $(seq 1 800); do
        grep -q '^attnbatch.sbatch: job .* restart 0 on' "$log" 2>/dev/null && break
        job_ended "$job" && break
        sleep 0.02
    done
    check "the job script has begun" grep -q '^attnbatch.sbatch: job .* restart 0 on' "$log"
    preempt_at 0 "during start-up"
    # The file records the options of the attempt that created it: the restart's, with
    # --resume, unless the first attempt got as far as creating it.
    creator=(--resume)
    [ -e out.h5.partial ] && creator=()

    # 2. Mid-run: once the restarted run reports progress (its rounds have begun).
    for _ in $(seq 1 400); do
        [ "$(sed -n '/restart 1 on/,$p' "$log" | grep -c '^progress:')" -ge 2 ] && break
        job_ended "$job" && break
        sleep 0.1
    done
    check "the restarted run reported progress" bash -c "sed -n '/restart 1 on/,\$p' '$log' | grep -q '^progress:'"
    preempt_at 1 "mid-run"

    expect_completed "$job" "$log"
    check "both restarts ran with --resume" test "$(grep -cE '^attnbatch.sbatch: .* run .* --resume$' "$log")" = 2
    check "Restarts=2 after completion" test "$(job_field "$job" Restarts)" = 2
    check "out.h5 complete, no .partial" test -f out.h5 -a ! -e out.h5.partial
    verify_all in.h5 out.h5
    # The same job uninterrupted, outside Slurm, with what the file records of the first
    # attempt (ranks, threads, io mode, options, paths; the time is pinned): byte-identical.
    mkdir -p uninterrupted && ln -sf ../in.h5 uninterrupted/in.h5
    (cd uninterrupted && OMP_NUM_THREADS=1 mpirun -np "$ranks" --bind-to none "$BIN" run --input in.h5 --output out.h5 \
        "${options[@]}" "${creator[@]}" >run.log 2>&1) ||
        note "the uninterrupted run failed: $(tail -3 uninterrupted/run.log)"
    check "byte-identical to an uninterrupted run (cmp)" cmp out.h5 uninterrupted/out.h5
    [ "$failures" = 0 ] || show_log "$log"
    ;;

preempt_term|preempt_term_mpirun)
    # SIGTERM as Slurm sends it on preemption or cancel, not only to the batch shell: with
    # srun to the step's tasks alone (scancel --signal=TERM), here one rank on each of two
    # nodes; with mpirun to every process of the job (--full: the shell, mpirun, which then
    # ends the ranks itself, and the ranks).
    launcher=srun scope=() layout=(-N 2 --ntasks-per-node 1)
    [ "$case_name" = preempt_term_mpirun ] && launcher=mpirun scope=(--full) layout=(-n 2)
    # Long enough (about 8 s) that the signal still finds the run going when the suite's other
    # tests slow scancel's delivery: a run of 2 s once ended and published before the SIGTERM
    # reached it, and the job was requeued with a complete OUTPUT.
    generate in.h5 --num-seqs "$(reference_sequences 8 2)" --seq-len 256 --dim 64 --heads 4 --seed 9
    options=(--heads 4 --kernel reference --save-weights none --unit-sequences 4 --progress auto --progress-interval 0.5)
    job=$(ATTNBATCH_LAUNCHER=$launcher sbatch --parsable "${layout[@]}" -c 1 -t 10 -o "$WORK/job-%j.out" "$SBATCH" \
        --input in.h5 --output out.h5 "${options[@]}") || die "sbatch failed"
    log=$WORK/job-$job.out
    for _ in $(seq 1 400); do
        n=$(grep -c '^progress:' "$log" 2>/dev/null)
        [ "${n:-0}" -ge 2 ] && break
        job_ended "$job" && break
        sleep 0.1
    done
    check "the run reported progress" grep -q '^progress:' "$log"
    scancel --signal=TERM "${scope[@]}" "$job" || fail "scancel --signal=TERM ${scope[*]} $job"
    requeued=0
    for _ in $(seq 1 240); do
        if [ "$(job_field "$job" Restarts)" = 1 ] && [ "$(job_field "$job" JobState)" = PENDING ]; then requeued=1; break; fi
        job_ended "$job" && break
        sleep 0.25
    done
    check "SIGTERM via $launcher: requeued (Restarts=1, PENDING)" test $requeued = 1
    [ $requeued = 1 ] || { show_log "$log"; finish; }
    if [ "$launcher" = srun ]; then
        check "the ranks stopped themselves: one line naming the phase, exit 5" \
            grep -q 'interrupted by SIGTERM during .* sequences were written; resume with --resume' "$log"
        check "srun passed on their exit 5" grep -q 'attnbatch exited with 5$' "$log"
    else
        check "mpirun ended the job itself (exit 1 or a signal), taken as interrupted: exit 5" \
            grep -qE 'stopped by the launcher or a signal after SIGTERM \(exit (1|1[3-9][0-9])\).*exit 5$' "$log"
    fi
    check "a resumable out.h5.partial, no out.h5" test -e out.h5.partial -a ! -e out.h5
    [ "$launcher" = srun ] && check "the job ran on 2 nodes x 1 rank" \
        grep -q '^  2 nodes, ranks per node 1; messaging ob1 over tcp' "$log"
    release_requeued "$job"
    expect_completed "$job" "$log"
    check "out.h5 complete, no .partial" test -f out.h5 -a ! -e out.h5.partial
    mkdir -p uninterrupted && ln -sf ../in.h5 uninterrupted/in.h5
    (cd uninterrupted && OMP_NUM_THREADS=1 mpirun -np 2 --bind-to none "$BIN" run --input in.h5 --output out.h5 \
        "${options[@]}" >run.log 2>&1) ||
        note "the uninterrupted run failed: $(tail -3 uninterrupted/run.log)"
    check "byte-identical to an uninterrupted run (cmp)" cmp out.h5 uninterrupted/out.h5
    [ "$failures" = 0 ] || show_log "$log"
    ;;

multinode)
    # sbatch -N 2 --ntasks-per-node 2 --cpus-per-task 1, through srun and through mpirun at
    # once (the rig has 4 nodes): each spans two nodes, over TCP, and says so.
    generate in.h5 --num-seqs 24 --seq-len 48 --dim 32 --heads 2 --min-len 3 --seed 5
    declare -A job_of=()
    for launcher in srun mpirun; do
        job_of[$launcher]=$(ATTNBATCH_LAUNCHER=$launcher sbatch --parsable -N 2 --ntasks-per-node 2 --cpus-per-task 1 -t 5 \
            -o "$WORK/job-%j.out" "$SBATCH" --input in.h5 --output "out-$launcher.h5" --heads 2 \
            --report "report-$launcher.json") || die "sbatch ($launcher) failed"
    done
    for launcher in srun mpirun; do
        job=${job_of[$launcher]}
        expect_completed "$job" "$WORK/job-$job.out" || continue
        check "$launcher: 4 rank(s) x 1 thread(s) via $launcher" grep -q "4 rank(s) x 1 thread(s) via $launcher" "$WORK/job-$job.out"
        check "$launcher: PERFORMANCE ranks=4 threads=1" grep -qE '^PERFORMANCE ranks=4 threads=1 sequences=24 ' "$WORK/job-$job.out"
        hosts=$(scontrol show hostnames "$(job_field "$job" NodeList)" | tr '\n' ' ')
        check "$launcher: the report says 2 nodes ($hosts) x 2 ranks, ob1 chosen by Open MPI over tcp + vader" \
            /usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
m = r["messaging"]
assert r["nodes"] == 2 and r["ranks_per_node"] == [2, 2], (r["nodes"], r["ranks_per_node"])
assert r["node_names"] == sys.argv[2].split(), (r["node_names"], sys.argv[2])
assert (m["layer"], m["chosen_by"], m["transports"]) == ("ob1", "Open MPI", ["tcp", "vader"]), m' "report-$launcher.json" "$hosts"
        verify_all in.h5 "out-$launcher.h5"
    done
    check "srun and mpirun wrote the same /output and /lse bytes" /usr/bin/python3 -c '
import h5py, sys
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert all(a[n][()].tobytes() == b[n][()].tobytes() for n in ("output", "lse", "attention"))' out-srun.h5 out-mpirun.h5
    ;;

multinode_node_lost|multinode_node_lost_srun)
    # One of the job's two nodes is lost mid-run (every process on it SIGKILLed, slurmd
    # included). mpirun notices within seconds and exits with a code of its own; the script
    # takes any code above 5 without a signal as a lost node: exit 5, requeue. srun does not
    # notice: Slurm ends the job when it declares the node DOWN (after SlurmdTimeout, 30 s on
    # the rig; the test declares it at once, as a node health check would) and, the job being
    # --requeue, requeues it itself; the script's SIGTERM forwarding gives exit 5. Either way
    # the restart runs on two other nodes with --resume and the output is byte-identical to
    # an uninterrupted run.
    launcher=mpirun
    [ "$case_name" = multinode_node_lost_srun ] && launcher=srun
    # About 6 s of the fp64 reference kernel: the node is lost after the first progress line.
    generate in.h5 --num-seqs "$(reference_sequences 6 2)" --seq-len 256 --dim 64 --heads 4 --seed 9
    options=(--heads 4 --kernel reference --save-weights none --unit-sequences 4 --progress auto --progress-interval 0.5)
    job=$(ATTNBATCH_LAUNCHER=$launcher sbatch --parsable -N 2 --ntasks-per-node 1 -c 1 -t 10 -o "$WORK/job-%j.out" \
        "$SBATCH" --input in.h5 --output out.h5 "${options[@]}") || die "sbatch failed"
    log=$WORK/job-$job.out
    for _ in $(seq 1 400); do
        grep -q '^progress:' "$log" 2>/dev/null && break
        job_ended "$job" && break
        sleep 0.1
    done
    check "the run reported progress" grep -q '^progress:' "$log"
    mapfile -t used < <(scontrol show hostnames "$(job_field "$job" NodeList)")
    lost=${used[1]:-}
    [ -n "$lost" ] || die "job $job is not on 2 nodes: NodeList=$(job_field "$job" NodeList)"
    t_kill=$SECONDS
    bash "$RIG" kill-node "$lost" || fail "kill-node $lost"
    note "killed every process of $lost ($launcher launcher)"
    if [ "$launcher" = mpirun ]; then
        for _ in $(seq 1 120); do grep -q 'attnbatch exited with' "$log" && break; sleep 0.25; done
        rc=$(sed -n 's/^attnbatch.sbatch: attnbatch exited with \([0-9]*\)$/\1/p' "$log" | head -n1)
        note "mpirun exited ${rc:-?} $((SECONDS - t_kill)) s after the node was lost"
        check "mpirun ended the run within 15 s with a code of its own (> 5): ${rc:-none}" \
            test -n "$rc" -a "${rc:-0}" -gt 5 -a $((SECONDS - t_kill)) -le 15
        check "the script took it as a lost node: exit 5 and requeue" \
            grep -q "the run lost ranks, or a node (the launcher exited $rc, a code attnbatch never uses).*exit 5$" "$log"
    fi
    check "a resumable out.h5.partial, no out.h5" test -e out.h5.partial -a ! -e out.h5
    # What Slurm does after SlurmdTimeout, at once (the job's end waits for the lost node).
    # Once the node is DOWN the requeued job may start at once, or wait for its hold.
    scontrol update NodeName="$lost" State=DOWN Reason="lost by the test" || fail "scontrol update $lost DOWN"
    requeued=0
    for _ in $(seq 1 240); do
        [ "$(job_field "$job" Restarts)" = 1 ] && { requeued=1; break; }
        job_ended "$job" && break
        sleep 0.25
    done
    check "requeued after the lost node (Restarts=1)" test $requeued = 1
    [ $requeued = 1 ] || { show_log "$log"; bash "$RIG" revive "$lost"; finish; }
    # The first incarnation ends (COMPLETING), then the restart waits for its hold (PENDING:
    # released here) or starts at once.
    for _ in $(seq 1 240); do
        case $(job_field "$job" JobState) in
            PENDING) release_requeued "$job"; break ;;
            RUNNING) grep -q 'restart 1 on' "$log" && break ;;
            COMPLETED|FAILED|CANCELLED) break ;;
        esac
        sleep 0.25
    done
    expect_completed "$job" "$log"
    check "the restart ran elsewhere than $lost: $(job_field "$job" NodeList)" \
        test -z "$(scontrol show hostnames "$(job_field "$job" NodeList)" | grep -x "$lost")"
    check "the restart ran with --resume" grep -qE '^attnbatch.sbatch: .* run .* --resume$' "$log"
    bash "$RIG" revive "$lost" || fail "revive $lost"
    mkdir -p uninterrupted && ln -sf ../in.h5 uninterrupted/in.h5
    (cd uninterrupted && OMP_NUM_THREADS=1 mpirun -np 2 --bind-to none "$BIN" run --input in.h5 --output out.h5 \
        "${options[@]}" >run.log 2>&1) ||
        note "the uninterrupted run failed: $(tail -3 uninterrupted/run.log)"
    check "byte-identical to an uninterrupted run (cmp)" cmp out.h5 uninterrupted/out.h5
    [ "$failures" = 0 ] || show_log "$log"
    ;;

*) die "unknown case '$case_name'" ;;
esac
note "case $case_name took $((SECONDS - t0)) s"
finish
