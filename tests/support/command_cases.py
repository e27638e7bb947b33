"""Command-line tests of attnbatch written as named cases (`TEST.py ATTNBATCH WORKDIR CASE`):
each case gets a fresh scratch directory and a Context that runs the binary there with a
timeout (a hang fails), in an environment without ATTNBATCH_* settings, as root where Open MPI
needs it; one_line_error() checks what every refusal promises."""
import os
import shutil
import sys

from harness import check, failures, fresh_directory, mpi_env, run_with_timeout

TIMEOUT = 120
ENV = {k: v for k, v in mpi_env().items() if not k.startswith("ATTNBATCH_")}


class Context:
    def __init__(self, binary, work):
        self.binary, self.work = os.path.abspath(binary), os.path.abspath(work)
        fresh_directory(self.work)

    def path(self, *names):
        return os.path.join(self.work, *names)

    def run(self, *args, cwd=None, env=None):
        environment = dict(ENV)
        environment.update(env or {})
        done = run_with_timeout([self.binary, *args], TIMEOUT, cwd=cwd or self.work, env=environment)
        if done is None:
            failures.append("attnbatch %s: no exit within %d s" % (" ".join(args), TIMEOUT))
            raise SystemExit(1)
        return done

    def ok(self, *args):
        done = self.run(*args)
        check(done.returncode == 0, "attnbatch %s: exit %d, %r" % (" ".join(args), done.returncode, done.stderr))
        return done

    def generate(self, name, *extra):
        self.ok("generate", "--output", self.path(name), *extra)

    def copy(self, source, name):
        shutil.copy(self.path(source), self.path(name))
        return name


def one_line_error(done, code, fragments, what):
    """Exit `code`, one line on stderr holding every fragment and no internal error; returns it."""
    check(done.returncode == code, "%s: exit %d, expected %d; stdout %r stderr %r"
          % (what, done.returncode, code, done.stdout[-300:], done.stderr))
    lines = done.stderr.splitlines()
    check(len(lines) == 1, "%s: stderr should be one line: %r" % (what, done.stderr))
    check("internal error" not in done.stderr, "%s: %r" % (what, done.stderr))
    for fragment in fragments:
        check(fragment in done.stderr, "%s: stderr lacks %r: %r" % (what, fragment, done.stderr))
    return lines[0] if lines else ""


def run_case(doc, cases, context=Context):
    """The main of such a test: runs the case named on the command line."""
    if len(sys.argv) != 4 or sys.argv[3] not in cases:
        print(doc)
        return 2
    binary, work, case = sys.argv[1:]
    cases[case](context(binary, work))
    if failures:
        print("%d failure(s) in %s" % (len(failures), case))
        return 1
    print("%s: OK" % case)
    return 0
