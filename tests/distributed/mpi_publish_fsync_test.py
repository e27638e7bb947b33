#!/usr/bin/python3
"""run --fsync on|off: what each mode asks of the disk, traced, and what it records.

usage: mpi_publish_fsync_test.py ATTNBATCH MPIEXEC WORKDIR

Every rank runs under strace (fsync, fdatasync, sync_file_range, with the paths of the file
descriptors). With --fsync on (the default) the output must be put on the disk while it is
written (the writeback thread's fdatasync of OUTPUT.partial), synced before its publication
(fsync of OUTPUT.partial) and the directory synced after the rename. With --fsync off none of
that may happen: no fdatasync or fsync of OUTPUT.partial, OUTPUT or the directory, nor of the
new file OUTPUT.partial.new at its creation (under --io parallel HDF5's MPI-IO driver syncs at
every flush, so the new file is closed and opened again instead of flushed). Both modes give
byte-identical /output, /lse and /attention, a complete OUTPUT, and record the mode in /config,
the header, PERFORMANCE and the --report; --dry-run shows it; a bad value exits 2 naming the option.
A run stopped with --fsync off and resumed without --fsync publishes without syncing (the
header says the .partial recorded it); given on the resume's command line, --fsync wins. With
whole /attention chunks in every unit, --fsync on writes them past the page cache (the report's
direct_write_bytes, where the file system takes O_DIRECT), and --fsync off writes some of them
each way (it tries both and keeps the cheaper), with the same bytes in the file; so does
--fsync on where steps begin and end inside chunks, for the whole chunks between.
Skipped (exit 77) when strace is not installed or cannot trace here.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, exit_status, fresh_directory, mpi_env, mpirun, run_with_timeout  # noqa: E402

SKIP = 77
ENV = mpi_env()
ENV.pop("ATTNBATCH_FAULT", None)
SYNC_CALLS = "fsync,fdatasync,sync_file_range"


def traced(binary, work, trace):
    """The per-rank command: attnbatch under strace, one trace file per rank."""
    wrapper = ('exec strace -f -qq -y -e trace=%s -o "%s.$OMPI_COMM_WORLD_RANK" "$@"' % (SYNC_CALLS, trace))
    return ["sh", "-c", wrapper, "sh", binary]


def run(binary, mpiexec, work, ranks, args, trace=None, env=None, expect=0, label=""):
    command = ([binary] if trace is None else traced(binary, work, trace)) + args
    result = run_with_timeout(mpirun(mpiexec, ranks, command), 300, env=env or ENV, cwd=work)
    if result is None:
        check(False, "%s: no exit within 300 s" % label)
        return None
    check(result.returncode == expect, "%s: exit %d, expected %d; stderr: %s" %
          (label, result.returncode, expect, result.stderr.strip()[-400:]))
    return result


def sync_calls(trace, ranks):
    """(call, path) of every traced call of every rank."""
    calls = []
    for rank in range(ranks):
        with open("%s.%d" % (trace, rank)) as f:
            for line in f:
                match = re.search(r"\b(fsync|fdatasync|sync_file_range)\(\d+<([^>]*)>", line)
                if match:
                    calls.append((match.group(1), match.group(2)))
    return calls


def datasets(path):
    with h5py.File(path, "r") as f:
        return {name: f[name][()].tobytes() for name in ("output", "lse", "attention") if name in f}, \
            f["config"][()].decode() if isinstance(f["config"][()], bytes) else str(f["config"][()]), \
            int(f.attrs["complete"])


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    binary, mpiexec, work = sys.argv[1:]
    binary = os.path.abspath(binary)
    fresh_directory(work)
    if shutil.which("strace") is None:
        print("SKIP: strace is not installed (Debian package strace); the test traces the sync calls")
        return SKIP
    probe = subprocess.run(["strace", "-qq", "-e", "trace=fsync", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        print("SKIP: strace cannot trace here: " + probe.stderr.strip())
        return SKIP

    generate = [binary, "generate", "--output", os.path.join(work, "in.h5"), "--num-seqs", "64", "--seq-len", "64",
                "--dim", "32", "--min-len", "5", "--seed", "3"]
    subprocess.run(generate, check=True, capture_output=True)
    common = ["run", "--input", "in.h5", "--heads", "2", "--threads", "1", "--unit-sequences", "4",
              "--save-weights", "all"]

    result = run(binary, mpiexec, work, 1, common + ["--output", "bad.h5", "--fsync", "maybe"], expect=2, label="bad value")
    if result:
        check("--fsync: 'maybe' is not one of on|off" in result.stderr, "bad value: stderr names it: " + result.stderr)
    for mode in ("on", "off"):
        args = common + ["--output", "dry.h5", "--dry-run"] + (["--fsync", mode] if mode == "off" else [])
        result = run(binary, mpiexec, work, 2, args, label="dry run " + mode)
        if result:
            check(", fsync %s" % mode in result.stdout, "dry run %s: the header shows it: %s" % (mode, result.stdout))
    check(not os.path.exists(os.path.join(work, "dry.h5")), "dry runs wrote nothing")

    reference = None
    for ranks, io in ((1, "gather"), (2, "parallel"), (2, "gather")):
        for mode in ("on", "off"):
            label = "%d rank(s) --io %s --fsync %s" % (ranks, io, mode)
            name = "out_%d_%s_%s.h5" % (ranks, io, mode)
            trace = os.path.join(work, "trace_%d_%s_%s" % (ranks, io, mode))
            report = os.path.join(work, name + ".json")
            args = common + ["--output", name, "--io", io, "--report", report] + (["--fsync", "off"] if mode == "off" else [])
            result = run(binary, mpiexec, work, ranks, args, trace=trace, label=label)
            if result is None:
                continue
            path = os.path.join(work, name)
            partial, directory = path + ".partial", os.path.realpath(work)
            calls = sync_calls(trace, ranks)
            published = [c for c in calls if c[1] in (partial, path)]
            started = [c for c in published if c[0] == "fdatasync"]
            synced = [c for c in published if c[0] == "fsync"]
            directory_synced = [c for c in calls if c[1] == directory]
            print("%s: %d sync calls on the output (%d fdatasync, %d fsync), %d on the directory" %
                  (label, len(published), len(started), len(synced), len(directory_synced)), flush=True)
            if mode == "on":
                check(started, "%s: no fdatasync of the output while it was written" % label)
                check(synced, "%s: no fsync of the output before its publication" % label)
                check(directory_synced, "%s: no fsync of the directory after the rename" % label)
            else:
                any_name = [c for c in calls if c[1].startswith(path)]  # OUTPUT.partial.new too
                check(not any_name, "%s: the output was synced: %s" % (label, any_name))
                check(not directory_synced, "%s: the directory was synced" % label)
            check("fsync=%s" % mode in result.stdout, "%s: PERFORMANCE says fsync=%s: %s" % (label, mode, result.stdout))
            check(json.load(open(report)).get("fsync") == mode, "%s: the report records fsync %s" % (label, mode))
            data, config, complete = datasets(path)
            check(complete == 1 and not os.path.exists(partial), "%s: OUTPUT complete, no .partial left" % label)
            recorded = re.search(r"^fsync = (\w+)", config, re.M)
            check(recorded and recorded.group(1) == mode, "%s: /config records fsync = %s: %s" % (label, mode, config))
            if reference is None:
                reference = data
            check(data == reference, "%s: /output, /lse, /attention differ from the first run's" % label)

    # Sequences whose maps (4 heads x 256 x 256 floats) fill a 1 MiB /attention chunk each, so
    # that every unit writes whole chunks, which --fsync on writes past the page cache where the
    # file system takes O_DIRECT (the report counts them); --fsync off tries both ways on every
    # rank, so each writes some past the page cache and not all of it. /output's
    # chunks hold 32 sequences: written past the page cache too where a step holds them whole.
    probe = os.path.join(work, "direct.probe")
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o600))
        direct_io = True
    except OSError:
        direct_io = False
    if os.path.exists(probe):
        os.unlink(probe)
    # Every sequence whole (no --min-len), and enough of them that the plan cuts none into pieces
    # of query rows (whose maps are parts of chunks).
    subprocess.run([binary, "generate", "--output", os.path.join(work, "whole.h5"), "--num-seqs", "64", "--seq-len", "256",
                    "--dim", "32", "--seed", "3"], check=True, capture_output=True)
    whole_maps, whole_output = 64 * 4 * 256 * 256 * 4, 64 * 256 * 32 * 4
    whole_data = None
    for mode in ("on", "off"):
        label = "whole chunks, --fsync %s" % mode
        name = "whole_%s.h5" % mode
        report = os.path.join(work, name + ".json")
        args = (["run", "--input", "whole.h5", "--heads", "4", "--threads", "1", "--save-weights", "all", "--output", name,
                 "--io", "parallel", "--report", report] + (["--fsync", "off"] if mode == "off" else []))
        if run(binary, mpiexec, work, 2, args, label=label) is None:
            continue
        recorded = json.load(open(report))
        per_rank = [rank["direct_write_bytes"] for rank in recorded["per_rank"]]
        direct = sum(per_rank)
        # Each rank's row block comes through the gather of its times: 8 or 12 rows with the
        # avx512 kernel, none with any other.
        row_blocks = [rank["row_block"] for rank in recorded["per_rank"]]
        avx512 = recorded["matrix_unit"] == "avx512"
        check(len(row_blocks) == 2 and all(rows in (8, 12) if avx512 else rows is None for rows in row_blocks),
              "%s: row blocks %s with matrix_unit %s" % (label, row_blocks, recorded["matrix_unit"]))
        # Rank 0 publishes (fsync, rename) while rank 1 waits at the barrier after it: rank 1's
        # waiting for the others covers rank 0's publication, and no rank waits longer than it ran.
        waits = [rank["wait"] for rank in recorded["per_rank"]]
        publish = recorded["phase_seconds"]["publish"]
        print("%s: waits %s, rank 0's publication %.4f s" % (label, waits, publish), flush=True)
        check(all(0 <= w <= rank["wall"] + 1e-6 for w, rank in zip(waits, recorded["per_rank"])),
              "%s: waits %s outside [0, wall]" % (label, waits))
        check(waits[1] >= publish - 2e-3, "%s: rank 1 waited %.4f s, less than rank 0's publication (%.4f s) it waits for"
              % (label, waits[1], publish))
        print("%s: %d bytes past the page cache (%s; O_DIRECT %s here)"
              % (label, direct, per_rank, "taken" if direct_io else "refused"), flush=True)
        if not direct_io:
            check(direct == 0, "%s: %d bytes written past the page cache where O_DIRECT is refused" % (label, direct))
        elif mode == "on":
            check(whole_maps <= direct <= whole_maps + whole_output,
                  "%s: %d bytes written past the page cache, expected %d-%d" % (label, direct, whole_maps, whole_maps + whole_output))
        else:
            check(all(0 < rank < (whole_maps + whole_output) // 2 for rank in per_rank),
                  "%s: each rank's bytes past the page cache %s, expected some but not all of its %d"
                  % (label, per_rank, (whole_maps + whole_output) // 2))
        data = datasets(os.path.join(work, name))[0]
        whole_data = data if whole_data is None else whole_data
        check(data == whole_data, "%s: /output, /lse, /attention differ from --fsync on's" % label)

    # Steps whose bounds are not chunk bounds: 250 sequences on 2 ranks in 8 rounds, about 16 a
    # step, against /attention chunks of 4 sequences (256 KiB each). --fsync on still writes the
    # whole chunks inside each step past the page cache, only the parts of a chunk at either end
    # through it (before, a step off chunk bounds went through the page cache whole).
    subprocess.run([binary, "generate", "--output", os.path.join(work, "offset.h5"), "--num-seqs", "250", "--seq-len",
                    "256", "--dim", "32", "--seed", "5"], check=True, capture_output=True)
    offset_maps = 250 * 256 * 256 * 4
    report = os.path.join(work, "offset.json")
    args = ["run", "--input", "offset.h5", "--threads", "1", "--save-weights", "all", "--output", "offset_out.h5",
            "--io", "parallel", "--report", report]
    if run(binary, mpiexec, work, 2, args, label="steps off chunk bounds") is not None:
        direct = sum(rank["direct_write_bytes"] for rank in json.load(open(report))["per_rank"])
        print("steps off chunk bounds: %d of %d bytes of maps past the page cache" % (direct, offset_maps), flush=True)
        if direct_io:
            check(direct >= 0.6 * offset_maps, "steps off chunk bounds: %d bytes past the page cache, expected at least "
                  "0.6 of the maps' %d" % (direct, offset_maps))
        else:
            check(direct == 0, "steps off chunk bounds: %d bytes past the page cache where O_DIRECT is refused" % direct)

    # Resumed: the .partial's recorded mode is kept unless the resume names one.
    for started_with, resumed_with, expect_sync in (("off", None, False), ("on", "off", False), ("off", "on", True)):
        label = "started --fsync %s, resumed %s" % (started_with, "--fsync " + resumed_with if resumed_with else "without --fsync")
        name = "resumed_%s_%s.h5" % (started_with, resumed_with)
        path = os.path.join(work, name)
        first = common + ["--output", name, "--fsync", started_with]
        run(binary, mpiexec, work, 2, first, env=dict(ENV, ATTNBATCH_FAULT="0:after_unit:6:signal"), expect=5,
            label=label + ": first attempt")
        check(os.path.exists(path + ".partial") and not os.path.exists(path), "%s: a .partial, no OUTPUT" % label)
        trace = os.path.join(work, "trace_" + name)
        again = common + ["--output", name, "--resume"] + (["--fsync", resumed_with] if resumed_with else [])
        result = run(binary, mpiexec, work, 2, again, trace=trace, label=label)
        if result is None:
            continue
        mode = "on" if expect_sync else "off"
        check(", fsync %s" % mode in result.stdout, "%s: the header says fsync %s: %s" % (label, mode, result.stdout))
        check(("as OUTPUT.partial recorded" in result.stdout) == (resumed_with is None),
              "%s: the header says where the mode came from: %s" % (label, result.stdout))
        calls = [c for c in sync_calls(trace, 2) if c[1] in (path, path + ".partial", os.path.realpath(work))]
        check(bool(calls) == expect_sync, "%s: sync calls %s, expected %s" % (label, calls, "some" if expect_sync else "none"))
        data, _, complete = datasets(path)
        check(complete == 1 and data == reference, "%s: the resumed OUTPUT is complete and identical" % label)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
