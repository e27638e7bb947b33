#!/usr/bin/python3
"""--resume continues a .partial cut short of the end its HDF5 superblock records (HDF5 itself
refuses to open such a file: "truncated file: eof = ..., stored_eof = ..."), one test per case:

  write_limit    a compressed run stopped by a file-size limit (RLIMIT_FSIZE, as `ulimit -f`):
                 exit 4 with one line naming the limit; a dry run of the resume says what the
                 run would do and changes nothing; the resume extends the file, says so, and
                 ends with the datasets of an uninterrupted run (and verify passes)
  cut_tail       a compressed run killed mid-run, its .partial then cut to 80% of its size (a
                 crash that lost the file's tail, done units' chunks with it): the resume finds
                 the lost units by their checksums, resets the chunks that cannot be read, and
                 ends with the datasets of an uninterrupted run; before it, a resume with other
                 options is refused (exit 2) and leaves the short file as it was
  lost_metadata  a compressed .partial cut to its first 2 KiB, and an uncompressed one to 60%
                 (its journal, written after the datasets, lost): the resume exits 4 with one
                 line and the --force hint, and leaves the file as it was
  mpi_write_limit  the write_limit run on two ranks under mpirun (MPIEXEC in the environment),
                 the limit on each rank: exit 4, attnbatch's first line naming the limit
                 although MPI-IO gives no reason (Open MPI adds its own lines around it);
                 the resume ends with the datasets of an uninterrupted run

Usage: truncated_resume_test.py ATTNBATCH WORKDIR CASE
"""
import os
import resource
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, check_same_results, digest, mpirun, run_with_timeout  # noqa: E402
from command_cases import ENV, TIMEOUT, one_line_error, run_case  # noqa: E402

RUN = ["--input", "in.h5", "--output", "out.h5", "--unit-sequences", "4", "--progress", "never"]
GZIP = ["--compression", "gzip:1"]


SMALL = ["--num-seqs", "96", "--seq-len", "32", "--dim", "32"]


def reference(c, options, shape=SMALL):
    """The input, and an uninterrupted run's output (ref.h5) to compare the resumed one with."""
    c.generate("in.h5", *shape, "--seed", "3")
    c.ok("run", *[("ref.h5" if arg == "out.h5" else arg) for arg in RUN], *options)
    return os.path.getsize(c.path("ref.h5"))


def resume_to_the_reference(c, options, what):
    dry = c.ok("run", *RUN, *options, "--resume", "--dry-run")
    check("bytes short of its recorded end" in dry.stdout and "the run would extend it" in dry.stdout,
          "%s: the dry run does not say the file is short and what the run would do: %r" % (what, dry.stdout))
    done = c.ok("run", *RUN, *options, "--resume")
    check("bytes short of its recorded end (a write limit or a crash) and was extended" in done.stdout,
          "%s: the resume does not say it extended the file: %r" % (what, done.stdout))
    if os.path.exists(c.path("out.h5")):
        check_same_results(c.path("ref.h5"), c.path("out.h5"), what, "the uninterrupted run")
        c.ok("verify", "--output", "out.h5", "--samples", "all")


def file_size_limit(limit):
    """A preexec_fn: what `ulimit -f` does, in bytes."""
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def write_limit(c):
    limit = reference(c, GZIP) // 2

    done = run_with_timeout([c.binary, "run", *RUN, *GZIP], TIMEOUT, cwd=c.work, env=ENV, preexec_fn=file_size_limit(limit))
    check(done is not None, "the limited run: no exit within %d s" % TIMEOUT)
    one_line_error(done, 4, ["out.h5.partial", "file-size limit"], "the limited run")
    partial = c.path("out.h5.partial")
    check(os.path.exists(partial) and not os.path.exists(c.path("out.h5")), "the limited run left no .partial alone")
    before = digest(partial)
    dry = c.ok("run", *RUN, *GZIP, "--resume", "--dry-run")
    check(digest(partial) == before, "the dry run changed the .partial")
    check("a dry run does neither" in dry.stdout, "the dry run: %r" % dry.stdout)
    resume_to_the_reference(c, GZIP, "write_limit")


def killed_partial(c, options):
    """The .partial of a run killed after its 12th unit, and its size."""
    killed = c.run("run", *RUN, *options, env={"ATTNBATCH_FAULT": "0:after_unit:12:kill"})
    partial = c.path("out.h5.partial")
    check(killed.returncode != 0 and os.path.exists(partial), "the killed run: exit %d, no .partial" % killed.returncode)
    return partial, os.path.getsize(partial)


def cut_tail(c):
    reference(c, GZIP)
    partial, size = killed_partial(c, GZIP)
    os.truncate(partial, size * 8 // 10)
    before = digest(partial)
    one_line_error(c.run("run", *RUN, *GZIP, "--causal", "--resume"), 2, ["other input or options", "causal"],
                   "a resume with other options")
    check(digest(partial) == before, "a resume refused for other options changed the short .partial")
    resume_to_the_reference(c, GZIP, "cut_tail")


def lost_metadata(c):
    reference(c, GZIP)
    for options, cut in ((GZIP, lambda size: 2048), ([], lambda size: size * 6 // 10)):
        what = "the resume of %s .partial without its metadata" % ("a compressed" if options else "an uncompressed")
        partial, size = killed_partial(c, options)
        os.truncate(partial, cut(size))
        before = digest(partial)
        one_line_error(c.run("run", *RUN, *options, "--resume"), 4, ["out.h5.partial", "--force"], what)
        check(digest(partial) == before, "%s: the refused .partial was changed" % what)
        check(not os.path.exists(c.path("out.h5")), "%s: a file named OUTPUT" % what)
        os.remove(partial)


def mpi_write_limit(c):
    # The limit on the ranks alone (prlimit, util-linux), and above the few MB of Open MPI's
    # own shared-memory files: mpirun's PMIx store outgrew half of the small case's 0.8 MB
    # (SIGKILL before any rank wrote), and the ranks' shared memory failed its ftruncate.
    limit = reference(c, GZIP, ["--num-seqs", "384", "--seq-len", "64", "--dim", "64"]) // 2
    ranks = ["prlimit", "--fsize=%d" % limit, c.binary, "run", *RUN, *GZIP, "--threads", "1"]
    done = run_with_timeout(mpirun(os.environ["MPIEXEC"], 2, ranks), TIMEOUT, cwd=c.work, env=ENV)
    check(done is not None, "the limited mpirun: no exit within %d s" % TIMEOUT)
    # Open MPI's own lines come around it (OMPIO's "error in writev", the MPI_ABORT banner).
    ours = [line for line in done.stderr.splitlines() if line.startswith("attnbatch")]
    first = ours[0] if ours else ""
    check(done.returncode == 4 and first.startswith("attnbatch run: error: ") and "file-size limit" in first,
          "the limited mpirun: exit %d, first attnbatch line %r" % (done.returncode, first))
    resumed = run_with_timeout(mpirun(os.environ["MPIEXEC"], 2, [c.binary, "run", *RUN, *GZIP, "--threads", "1", "--resume"]),
                               TIMEOUT, cwd=c.work, env=ENV)
    check(resumed is not None and resumed.returncode == 0, "the resume under mpirun: %r" % (resumed and resumed.stderr))
    check_same_results(c.path("ref.h5"), c.path("out.h5"), "mpi_write_limit", "the uninterrupted run")


if __name__ == "__main__":
    sys.exit(run_case(__doc__, {"write_limit": write_limit, "cut_tail": cut_tail, "lost_metadata": lost_metadata,
                                "mpi_write_limit": mpi_write_limit}))
