#!/usr/bin/python3
"""The README's quick start and distributed example run as printed.

usage: readme_examples_test.py ATTNBATCH MPIEXEC PYTHON WORKDIR

Takes the code blocks of README.md's sections "Quick start" and "A distributed run" in order
and, in WORKDIR (where `build/attnbatch` is the binary under test):

- runs every command line (`build/attnbatch ...`, `mpirun ...` with MPIEXEC) through the
  shell, and requires exit 0;
- runs every Python block (`import h5py ...`) with PYTHON, and requires exit 0;
- requires every line of a printed example that does not depend on the machine (the `run`
  header, where the heads came from, what `verify` recomputed and its verdict) to be among
  the lines the commands printed;

then checks what the README says of the results: the distributed output holds the same bits
as the one-rank output, `verify` passed, and the dry run wrote nothing. Commands that need a
cluster (`sbatch`) are not run.
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, exit_status, fresh_directory, mpi_env, run_with_timeout  # noqa: E402

SECTIONS = ("Quick start", "A distributed run")
# Printed lines that are the same on any machine (sizes, memory and times are not).
STABLE = re.compile(r"^(attnbatch run: |heads from |attnbatch verify: |OK: within tolerance)")


def blocks(readme, title):
    """The indented code blocks of one `## title` section, each as a list of its non-blank lines."""
    parts = re.split(r"^## ", readme, flags=re.M)
    section = next((part for part in parts if part.startswith(title + "\n")), "")
    found, current = [], []
    for line in section.splitlines():
        if line.startswith("    "):
            current.append(line[4:])
        elif line.strip() and current:  # prose ends a block
            found.append(current)
            current = []
    if current:
        found.append(current)
    return found


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    binary, mpiexec, python, work = (os.path.abspath(a) for a in sys.argv[1:])
    repository = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    with open(os.path.join(repository, "README.md")) as f:
        readme = f.read()

    fresh_directory(work)
    os.symlink(os.path.dirname(binary), os.path.join(work, "build"))
    env = mpi_env()
    printed = []
    commands = pythons = examples = 0
    for title in SECTIONS:
        section_blocks = blocks(readme, title)
        check(section_blocks, "README.md has no code in its section %r" % title)
        for block in section_blocks:
            first = block[0]
            if first.startswith(("build/attnbatch", "mpirun ")):
                for line in block:
                    command = re.sub(r"^mpirun ", mpiexec + " ", line)
                    result = run_with_timeout(["/bin/sh", "-c", command], 300, cwd=work, env=env)
                    commands += 1
                    if not check(result is not None, "`%s` did not end within 300 s" % line):
                        continue
                    check(result.returncode == 0, "`%s` exits %d: %s" % (line, result.returncode, result.stderr.strip()))
                    printed += [l.strip() for l in result.stdout.splitlines()]
            elif first.startswith(("import ", "from ")):
                result = run_with_timeout([python, "-c", "\n".join(block)], 120, cwd=work, env=env)
                pythons += 1
                check(result is not None and result.returncode == 0,
                      "the Python example of %r fails: %s" % (title, result and result.stderr.strip()))
            else:
                for line in block:
                    if STABLE.match(line.strip()):
                        examples += 1
                        check(line.strip() in printed, "README.md shows `%s`, which no command printed" % line.strip())

    check(commands >= 6, "ran only %d commands from README.md (the parser is broken?)" % commands)
    check(pythons >= 1, "found no Python example in README.md's quick start")
    check(examples >= 4, "found only %d printed lines to compare (the parser is broken?)" % examples)
    check(not os.path.exists(os.path.join(work, "big.h5")) and not os.path.exists(os.path.join(work, "big.h5.partial")),
          "the dry run wrote big.h5")
    same = run_with_timeout([python, "-c", """
import sys, h5py, numpy as np
with h5py.File("out.h5", "r") as a, h5py.File("dist.h5", "r") as b:
    sys.exit(0 if all(np.array_equal(a[k][()], b[k][()]) for k in ("output", "lse", "attention")) else 1)
"""], 120, cwd=work)
    check(same is not None and same.returncode == 0,
          "dist.h5 does not hold the same bits as out.h5: %s" % (same and same.stderr.strip()))
    print("ran %d commands and %d Python examples of README.md; %d printed lines compared" % (commands, pythons, examples))
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
