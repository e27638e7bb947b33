#!/usr/bin/python3
"""A stop signal at any moment of a run, start-up and shut-down included, ends every rank with
exit 5 and one line naming the phase, or with 0 when OUTPUT was already published.

usage: mpi_signal_test.py ATTNBATCH MPIEXEC WORKDIR CASE

CASE
  sweep    One resumed 2-rank run (its OUTPUT.partial about 75% done), measured uninterrupted
           first: its length and, from --report, when each phase began. Then SIGTERM to both
           ranks, as a scheduler sends it, at MOMENTS or more moments counted from when both
           ranks have started: 0 and 0.05 s (start-up, before MPI_Init), the middle of every
           measured phase (start-up after MPI_Init, validation, lengths, resume verification,
           planning, value scan, output creation, rounds at 10, 50 and 90%, final flush,
           publish, shut-down), 30% and 70% of the run's length, past its exit, at OUTPUT's
           appearance and 0.05 s after. Every attempt starts from the same .partial; every
           stopped one is resumed to the end (unless it left the .partial byte for byte as it
           was: the measured run resumed that state already). A table of moment, phase and
           exit codes is printed. The long phases must have been hit (a missed one is aimed
           at again, a little earlier or later, as the machine's load moves the phases).
  phases   Deterministic, on a small job: SIGTERM raised inside every phase on every rank
           (ATTNBATCH_FAULT=*:PHASE:signal), resumed and fresh; a SIGTERM already pending when
           the ranks start (blocked across exec, before main() and MPI_Init); SIGUSR1 sent to
           mpirun, which forwards it to the ranks; a --resume of a complete OUTPUT signalled
           during validation.

What every attempt must show: every rank's exit code is 5 or 0 (never 1, never death by the
signal); with 5, stderr has exactly one line from attnbatch,
  attnbatch run: error: interrupted by SIGTERM during <phase> after N sequences were written; resume with --resume
where N is what this attempt added to the journal, no OUTPUT exists (a watcher thread polls
for it during the attempt), OUTPUT.partial is kept and a last --resume makes a file byte for
byte the uninterrupted run's (creation time pinned with SOURCE_DATE_EPOCH); with 0, OUTPUT is
that file already.

The one moment no program can cover is between exec() and its first instruction (the
dynamic loader, a few milliseconds): the sweep's earliest moments wait until the ranks have
started (their handlers show in /proc/PID/status) and send the signal then.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import (catches, check, digest, exit_status, fresh_directory, join_or_kill, mpi_env, mpirun,  # noqa: E402
                     rank_pids, run_with_timeout, wait_until_gone)

ENV = mpi_env(SOURCE_DATE_EPOCH="1767225600")
ENV.pop("ATTNBATCH_FAULT", None)
RANKS = 2
TIMEOUT_S = 180
MOMENTS = 12
# A stop is answered at the next stop point: a slice of a long phase or a round, well under a
# second here; the bound leaves room for a loaded machine and mpirun.
BOUND_S = 15.0
PHASES = ["start-up", "validation", "lengths", "resume verification", "planning", "value scan", "output creation",
          "rounds", "final flush", "publish"]
MESSAGE = re.compile(r"^attnbatch run: error: interrupted by (SIGTERM|SIGUSR1|SIGINT) during (.+) after (\d+) "
                     r"sequences were written; resume with --resume$")
LATE_NOTE = re.compile(r"note: (SIGTERM|SIGUSR1|SIGINT) arrived during (.+), when nothing was left to interrupt")


class Resumable:
    """An input, the uninterrupted run's OUTPUT, and a .partial that every attempt starts from."""

    def __init__(self, binary, mpiexec, work, generate, options, stop_after_units):
        self.binary, self.mpiexec, self.work, self.options = binary, mpiexec, work, options
        run = subprocess.run([binary, "generate", "--output", os.path.join(work, "in.h5")] + generate,
                             capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit("generate failed: " + run.stderr)
        self.ref_dir, self.dir = os.path.join(work, "ref"), os.path.join(work, "run")
        os.makedirs(self.ref_dir)
        os.makedirs(self.dir)
        self.output = os.path.join(self.dir, "out.h5")
        self.partial = self.output + ".partial"
        self.base = os.path.join(work, "base.partial")
        # The reference and the .partial's first attempt have the same command line: the file
        # records the options of the attempt that created it.
        for directory, fault in ((self.ref_dir, None), (self.dir, "0:after_unit:%d:signal" % stop_after_units)):
            env = dict(ENV, ATTNBATCH_FAULT=fault) if fault else ENV
            run = run_with_timeout(self.command(), TIMEOUT_S, cwd=directory, env=env)
            expected = 5 if fault else 0
            if run is None or run.returncode != expected:
                raise SystemExit("setting up in %s: expected exit %d, got %s: %s" %
                                 (directory, expected, run and run.returncode, run and run.stderr))
        self.reference = os.path.join(self.ref_dir, "out.h5")
        self.reference_digest = digest(self.reference)
        shutil.copyfile(self.partial, self.base)
        self.base_done = done_sequences(self.base)
        self.base_digest = digest(self.base)
        self.watching = False
        self.early_output = []
        threading.Thread(target=self.watch, daemon=True).start()

    def command(self, extra=(), options=()):
        # Relative paths, the same in both directories: /config records them.
        return mpirun(self.mpiexec, RANKS, [self.binary, "run", "--input", "../in.h5", "--output", "out.h5", "--resume"] +
                      self.options + list(extra), options)

    def watch(self):
        while True:
            if self.watching and os.path.exists(self.output):
                self.early_output.append(time.monotonic())
            time.sleep(0.002)

    def restore(self):
        for path in (self.output, self.partial):
            if os.path.exists(path):
                os.remove(path)
        shutil.copyfile(self.base, self.partial)
        self.early_output = []

    def finish(self, label):
        """The last --resume: exit 0 and the uninterrupted run's bytes."""
        run = run_with_timeout(self.command(), TIMEOUT_S, cwd=self.dir, env=ENV)
        code = run.returncode if run else None
        ok = check(code == 0, "%s: the last --resume exited %s: %s" % (label, code, run and run.stderr.strip()[-300:]))
        return ok and self.expect_reference(label + ", after the last --resume")

    def expect_reference(self, label):
        ok = check(not os.path.exists(self.partial), "%s: OUTPUT.partial left beside OUTPUT" % label)
        ok &= check(os.path.exists(self.output) and digest(self.output) == self.reference_digest,
                    "%s: OUTPUT is not byte for byte the uninterrupted run's (cmp %s %s)" % (label, self.output,
                                                                                           self.reference))
        return ok


def done_sequences(partial):
    with h5py.File(partial, "r") as f:
        bounds = f["journal/unit_bounds"][:]
        done = f["journal/progress"][:, 0]
        return int(sum(int(bounds[u + 1] - bounds[u]) for u in range(len(done)) if done[u]))


def attnbatch_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("attnbatch")]


def check_stopped(job, label, code, stdout, stderr, done_before, signal_name="SIGTERM"):
    """An attempt that ended with 5: its one line, OUTPUT absent, the .partial resumable.
    Returns the phase the line names."""
    lines = attnbatch_lines(stderr)
    phase = None
    if check(len(lines) == 1, "%s: expected one line from attnbatch on stderr, got %r" % (label, lines)):
        match = MESSAGE.match(lines[0])
        if check(match is not None, "%s: not the stop message: %r" % (label, lines[0])):
            phase = match.group(2)
            check(match.group(1) == signal_name, "%s: names %s, expected %s" % (label, match.group(1), signal_name))
            check(phase in PHASES, "%s: unknown phase %r" % (label, phase))
            if os.path.exists(job.partial):
                added = done_sequences(job.partial) - done_before
                check(int(match.group(3)) == added, "%s: says %s sequences were written, the journal gained %d" %
                      (label, match.group(3), added))
    check(not os.path.exists(job.output), "%s: a file named OUTPUT exists after exit 5" % label)
    check(os.path.exists(job.partial), "%s: no OUTPUT.partial kept" % label)
    check(not job.early_output, "%s: OUTPUT existed during the attempt" % label)
    return phase


# ----------------------------------------------------------------------------------- sweep

def per_rank_command(job, work_rc):
    """The attempt's command, each rank writing its own exit code to rc.<rank>; mpirun waits for
    every rank instead of ending the others when one exits non-zero (and then exits 0 itself)."""
    wrapper = '"$@"; code=$?; echo $code > "%s/rc.$OMPI_COMM_WORLD_RANK"; exit $code' % work_rc
    return mpirun(job.mpiexec, RANKS, ["sh", "-c", wrapper, "sh", job.binary, "run", "--input", "../in.h5", "--output",
                                       "out.h5", "--resume"] + job.options,
                  options=["--mca", "orte_abort_on_non_zero_status", "0"])


PUBLISHED = "at OUTPUT's appearance"
PUBLISHED_LATER = "0.05 s after OUTPUT's appearance"


def signalled_attempt(job, moment, report=None):
    """Starts an attempt from the base .partial and, `moment` seconds after both ranks have
    started (their handlers exist), sends SIGTERM to every rank; with moment PUBLISHED, as soon
    as OUTPUT appears, with PUBLISHED_LATER 0.05 s after. Returns a dict: codes (per rank), stdout, stderr, started (Unix time),
    sent and exited (seconds after the start; sent None when no rank was left)."""
    job.restore()
    for name in os.listdir(job.work):
        if name.startswith("rc."):
            os.remove(os.path.join(job.work, name))
    command = per_rank_command(job, job.work) + (["--report", report] if report else [])
    job.watching = moment not in (PUBLISHED, PUBLISHED_LATER)
    launch = time.monotonic()
    process = subprocess.Popen(command, cwd=job.dir, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    output = {}
    reader = threading.Thread(target=lambda: output.update(zip(("stdout", "stderr"), process.communicate())))
    reader.start()
    sent = start = started_unix = appeared = None
    while process.poll() is None and time.monotonic() - launch < TIMEOUT_S:
        pids = rank_pids(job.binary, job.dir)
        if start is None and len(pids) == RANKS and all(catches(pid, signal.SIGTERM) for pid in pids):
            start, started_unix = time.monotonic(), time.time()
            if moment is None:
                break
        if moment in (PUBLISHED, PUBLISHED_LATER) and appeared is None and os.path.exists(job.output):
            appeared = time.monotonic()
        due = start is not None and moment is not None and (
            time.monotonic() - start >= moment if moment not in (PUBLISHED, PUBLISHED_LATER) else
            appeared is not None and time.monotonic() - appeared >= (0.05 if moment == PUBLISHED_LATER else 0.0))
        if due:
            delivered = 0
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGTERM)
                    delivered += 1
                except ProcessLookupError:
                    pass
            sent = time.monotonic() - start if delivered else None
            break
        time.sleep(0.0005)
    check(join_or_kill(process, reader, TIMEOUT_S), "attempt with SIGTERM at %s: no exit within %d s (a hang)" % (moment, TIMEOUT_S))
    exited = time.monotonic() - (start if start is not None else launch)
    job.watching = False
    codes = {}
    for rank in range(RANKS):
        path = os.path.join(job.work, "rc.%d" % rank)
        codes[rank] = int(open(path).read()) if os.path.exists(path) else None
    return dict(codes=codes, stdout=output.get("stdout", ""), stderr=output.get("stderr", ""), started=started_unix,
                sent=sent, exited=exited)


def measure(job):
    """The run uninterrupted, from the base .partial: when each phase began and when it exited,
    in seconds after both ranks had started. The second of two runs: the first finds the
    files' pages cold, the attempts after it warm."""
    report = os.path.join(job.work, "baseline.json")
    signalled_attempt(job, None)
    run = signalled_attempt(job, None, report=report)
    if run["codes"][0] != 0 or run["started"] is None:
        raise SystemExit("the uninterrupted resumed run failed (%s): %s" % (run["codes"], run["stderr"]))
    job.expect_reference("the uninterrupted resumed run")
    with open(report) as f:
        data = json.load(f)
    offset = data["started_at_unix_seconds"] - run["started"]
    return {name: offset + seconds for name, seconds in data["phase_starts"].items()}, run["exited"]


ORDER = PHASES + ["shut-down"]
KEYS = ["start_up", "validation", "lengths", "resume_verification", "planning", "value_scan", "output_creation", "rounds",
        "final_flush", "publish", "shut_down"]
# Long enough here for a timed signal to land in them: aimed at again, a little earlier or
# later, when the machine's load moved them. The short phases are the `phases` case's.
AIMED_AGAIN = {"resume verification", "value scan", "rounds"}
PUBLISHED_SEEN = "exit 0 once OUTPUT was published"
MUST_SEE = {"start-up", "resume verification", "value scan", "rounds", PUBLISHED_SEEN, "after the exit"}


def sweep_moments(starts, end):
    """(moment, the phase it aims at): the ranks' first instruction and 0.05 s later (start-up,
    before MPI_Init), the middle of every phase (three points of the rounds, one late in
    start-up, after MPI_Init), fractions of the run, past its end, and OUTPUT's appearance."""
    present = [k for k in KEYS if k in starts]
    bounds = [starts[k] for k in present] + [end]
    moments = [(0.0, "start-up"), (0.05, "start-up")]
    for i, key in enumerate(present):
        first, last = bounds[i], bounds[i + 1]
        fractions = {"start_up": (0.9,), "rounds": (0.1, 0.5, 0.9)}.get(key, (0.5,))
        moments += [(first + f * (last - first), ORDER[KEYS.index(key)]) for f in fractions]
    moments += [(f * end, "%.0f%% of the run" % (f * 100)) for f in (0.3, 0.7)]
    # Well past the end: a loaded machine can stretch a run to twice the measured one, and a
    # moment no rank lives to see costs nothing (the signal is simply never sent).
    moments.append((3 * end + 2.0, "after the exit"))
    return sorted(moments) + [(PUBLISHED, "publish"), (PUBLISHED_LATER, "shut-down")]


def case_sweep(job):
    starts, end = measure(job)
    present = sorted(starts.items(), key=lambda kv: kv[1])
    durations = {ORDER[KEYS.index(key)]: (present[i + 1][1] if i + 1 < len(present) else end) - at
                 for i, (key, at) in enumerate(present)}
    print("the resumed run uninterrupted: exit %.2f s after its ranks started; phases began at %s" %
          (end, ", ".join("%s %.3f" % kv for kv in present)), flush=True)
    moments = sweep_moments(starts, end)
    check(len(moments) >= MOMENTS, "only %d moments" % len(moments))
    table, seen = [], set()
    queue = [(moment, aim, 0) for moment, aim in moments]
    # The load of the machine moves the phases from one attempt to the next: a long phase that
    # was missed is aimed at again, bisecting between the moments that fell before and after.
    earlier, later = {}, {}
    order = ORDER + ["after the exit"]
    while queue:
        moment, aim, tries = queue.pop(0)
        if tries > 0 and aim in seen:
            continue  # hit meanwhile, by another moment
        shown = moment if isinstance(moment, str) else "%.3f" % moment
        label = "SIGTERM at %s (%s)" % (shown, aim)
        run = signalled_attempt(job, moment)
        code = run["codes"][0]
        detail = ""
        check(len(set(run["codes"].values())) == 1 and code in (0, 5),
              "%s: rank exit codes %s, expected all 5 or all 0; stderr: %s" % (label, run["codes"], run["stderr"].strip()[-500:]))
        if code == 5:
            phase = check_stopped(job, label, code, run["stdout"], run["stderr"], job.base_done) or "?"
            if check(run["sent"] is not None, "%s: exit 5, yet no signal was sent" % label):
                check(run["exited"] - run["sent"] < BOUND_S, "%s: exit %.1f s after the signal, bound %.0f s" %
                      (label, run["exited"] - run["sent"], BOUND_S))
            # Stopped before it changed a byte of the .partial, the attempt left the state the
            # measured run resumed to the reference's bytes: resuming it again proves nothing.
            if not os.path.exists(job.partial) or digest(job.partial) != job.base_digest:
                job.finish(label)
        else:
            job.expect_reference(label)
            note = LATE_NOTE.search(run["stdout"])
            check(note is None or note.group(2) in ("publish", "shut-down"),
                  "%s: exit 0, yet the signal came during %s" % (label, note and note.group(2)))
            # Where: the note rank 0 prints, or none once it had printed its last line.
            phase = "after the exit" if run["sent"] is None else note.group(2) if note else "shut-down"
            if run["sent"] is not None:
                seen.add(PUBLISHED_SEEN)
                detail = "" if note else " (after the last line)"
        seen.add(phase)
        sent = "%.3f" % run["sent"] if run["sent"] is not None else "not sent: no rank left"
        table.append((shown, aim, sent, phase + detail, run["codes"]))
        if aim in AIMED_AGAIN and phase != aim and phase in order and tries < 5:
            if order.index(phase) < order.index(aim):
                earlier[aim] = max(earlier.get(aim, 0.0), moment)
            else:
                later[aim] = min(later.get(aim, moment), moment)
            low = earlier.get(aim, 0.0)
            high = later.get(aim, low + 2 * max(0.05, durations.get(aim, 0.1)))
            queue.append(((low + high) / 2, aim, tries + 1))
    print("\n| moment (s after the ranks started) | aimed at | SIGTERM sent at (s) | phase | exit codes of the ranks |")
    print("| --- | --- | --- | --- | --- |")
    for shown, aim, sent, phase, codes in table:
        print("| %s | %s | %s | %s | %s |" % (shown, aim, sent, phase, " ".join(str(codes[r]) for r in sorted(codes))))
    print(flush=True)
    for phase in sorted(MUST_SEE):
        check(phase in seen, "the sweep never hit %s (seen: %s)" % (phase, sorted(seen)))


# ---------------------------------------------------------------------------------- phases

def plain_attempt(job, extra_env=None, prefix=(), extra=()):
    """One attempt on what the run directory holds, under a plain mpirun (which ends every rank
    as soon as one exits non-zero)."""
    job.early_output = []
    command = job.command(extra)
    at = command.index(job.binary)
    command[at:at] = list(prefix)
    job.watching = True
    run = run_with_timeout(command, TIMEOUT_S, cwd=job.dir, env=dict(ENV, **(extra_env or {})))
    job.watching = False
    check(wait_until_gone(job.binary, job.dir), "ranks still running 30 s after mpirun exited")
    if run is None:
        check(False, "%s: no exit within %d s (a hang)" % (command, TIMEOUT_S))
        return None, "", ""
    return run.returncode, run.stdout, run.stderr


def expect_stop(job, label, run, phase, signal_name="SIGTERM"):
    """Checks an attempt stopped during `phase`; the next attempt continues its .partial."""
    code, out, err = run
    print("%s: exit %s: %s" % (label, code, " | ".join(attnbatch_lines(err)) or "-"), flush=True)
    if check(code == 5, "%s: exit %s, expected 5; stderr: %s" % (label, code, err.strip()[-400:])):
        named = check_stopped(job, label, code, out, err, job.done_before, signal_name)
        check(named == phase, "%s: the line names %r, expected %r" % (label, named, phase))
    job.done_before = done_sequences(job.partial) if os.path.exists(job.partial) else 0


def usr1_to_mpirun(job, aim):
    """SIGUSR1 to mpirun, which forwards it to every rank: once the ranks have started, or once
    they have written a first round."""
    job.early_output = []
    job.watching = True
    process = subprocess.Popen(job.command(["--progress", "auto", "--progress-interval", "0.001"]), cwd=job.dir, env=ENV,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + TIMEOUT_S
    if aim == "start-up":
        while time.monotonic() < deadline and process.poll() is None:
            pids = rank_pids(job.binary, job.dir)
            if len(pids) == RANKS and all(catches(pid, signal.SIGUSR1) for pid in pids):
                break
            time.sleep(0.0005)
    else:
        for line in process.stdout:
            if line.startswith("progress:") or time.monotonic() > deadline:
                break
    process.send_signal(signal.SIGUSR1)
    out, err = process.communicate(timeout=TIMEOUT_S)
    job.watching = False
    check(wait_until_gone(job.binary, job.dir), "ranks still running 30 s after mpirun exited")
    expect_stop(job, "SIGUSR1 to mpirun during %s" % aim, (process.returncode, out, err), aim, "SIGUSR1")


def case_phases(job):
    # One chain of attempts on one .partial, each stopped inside the next phase by a SIGTERM
    # that every rank raises on entering it; each continues what the one before left. After
    # the final flush every unit is done, so the last attempt gets to publish: exit 0.
    job.restore()
    job.done_before = job.base_done
    for site, phase in (("validation", "validation"), ("lengths", "lengths"),
                        ("resume_verification", "resume verification"), ("planning", "planning"),
                        ("value_scan", "value scan"), ("output_creation", "output creation"), ("rounds", "rounds"),
                        ("final_flush", "final flush")):
        expect_stop(job, "SIGTERM inside %s" % phase, plain_attempt(job, {"ATTNBATCH_FAULT": "*:%s:signal" % site}), phase)
    code, out, err = plain_attempt(job, {"ATTNBATCH_FAULT": "*:publish:signal"})
    print("SIGTERM inside publish: exit %s: %s" % (code, " | ".join(l.strip() for l in out.splitlines() if "note:" in l)))
    check(code == 0, "SIGTERM inside publish: exit %s, expected 0; stderr: %s" % (code, err.strip()[-300:]))
    check(LATE_NOTE.search(out) is not None and "during publish" in out, "SIGTERM inside publish: no note: %r" % out[-300:])
    job.expect_reference("the chain, published")

    # Already complete: a --resume signalled during validation has nothing to interrupt.
    code, out, err = plain_attempt(job, {"ATTNBATCH_FAULT": "*:validation:signal"})
    print("SIGTERM in validation, OUTPUT complete: exit %s: %s" % (code, " | ".join(l.strip() for l in out.splitlines())))
    check(code == 0 and "nothing to resume" in out and "note: SIGTERM arrived during validation" in out,
          "--resume of a complete OUTPUT, SIGTERM in validation: exit %s, %r" % (code, out))
    job.expect_reference("--resume of a complete OUTPUT, SIGTERM in validation")

    # A fresh run: stopped before OUTPUT.partial exists it leaves no file at all; stopped once
    # it is created, the file is closed resumable.
    os.remove(job.output)
    code, out, err = plain_attempt(job, {"ATTNBATCH_FAULT": "*:value_scan:signal"})
    print("SIGTERM inside value scan, no .partial yet: exit %s: %s" % (code, " | ".join(attnbatch_lines(err))), flush=True)
    check(code == 5 and "during value scan after 0 sequences" in err, "SIGTERM inside value scan (fresh): exit %s, %r" %
          (code, err.strip()[-300:]))
    check(not os.path.exists(job.partial) and not os.path.exists(job.output),
          "SIGTERM inside value scan (fresh): a file was left")
    job.done_before = 0
    expect_stop(job, "SIGTERM inside output creation, fresh", plain_attempt(job, {"ATTNBATCH_FAULT": "*:output_creation:signal"}),
                "output creation")

    # Pending before main(): blocked across exec, as a launcher might leave it, the signal is
    # taken when the handlers are installed and answered once MPI is up.
    pending = ["/usr/bin/python3", "-c", "import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, "
               "[signal.SIGTERM]); os.kill(os.getpid(), signal.SIGTERM); os.execv(sys.argv[1], sys.argv[1:])"]
    expect_stop(job, "SIGTERM pending at exec (before main and MPI_Init)", plain_attempt(job, prefix=pending), "start-up")
    usr1_to_mpirun(job, "start-up")
    usr1_to_mpirun(job, "rounds")
    job.finish("the fresh chain")


CASES = {
    # 2000 sequences of 64 tokens, d = 256, every attention map stored: 260 MB in, 265 MB out;
    # the .partial holds about 75% of it, so a resumed run verifies 200 MB and, with --io
    # gather (rank 0 reads and writes for both), scans all 260 MB and computes 500 sequences:
    # about 1.5 s here, its long phases a tenth to half a second each. float64 input, because
    # the rounds' own reads check float32 input for NaN/inf and the value scan before them is
    # then only the weights' (job.cpp, scan_in_reads): float64 keeps that phase long.
    "sweep": (case_sweep, ["--num-seqs", "2000", "--seq-len", "64", "--dim", "256", "--min-len", "48", "--seed", "3",
                           "--dtype", "float64"],
              ["--heads", "4", "--threads", "1", "--unit-sequences", "16", "--progress", "never", "--io", "gather"], 1500),
    "phases": (case_phases, ["--num-seqs", "160", "--seq-len", "32", "--dim", "32", "--min-len", "4", "--seed", "8"],
               ["--heads", "2", "--threads", "1", "--unit-sequences", "4", "--save-weights", "mean"], 10),
}


def main():
    if len(sys.argv) != 5 or sys.argv[4] not in CASES:
        print(__doc__)
        return 2
    binary, mpiexec, work, case = sys.argv[1:]
    binary = os.path.realpath(binary)
    fresh_directory(work)
    work = os.path.realpath(work)
    run, generate, options, stop_after = CASES[case]
    started = time.monotonic()
    job = Resumable(binary, mpiexec, work, generate, options, stop_after)
    run(job)
    print("case %s took %.0f s" % (case, time.monotonic() - started))
    shutil.rmtree(work, ignore_errors=True)  # hundreds of MB
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
