#!/usr/bin/python3
"""`cmake --install` puts a working package under the prefix: PREFIX/lib/python3/dist-packages
/attnbatch, importable there and computing what the build tree's module computes.

usage: install_test.py CMAKE BUILD_DIR PYTHON WORKDIR
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, exit_status, fresh_directory  # noqa: E402

PROBE = """
import attnbatch, numpy as np
x = np.arange(2 * 8 * 16, dtype=np.float32).reshape(2, 8, 16) / 100
print(attnbatch.__file__)
print(float(attnbatch.attention(x, heads=2).sum()))
"""


def main():
    cmake, build, python, work = sys.argv[1:5]
    build = os.path.abspath(build)
    prefix = os.path.join(work, "prefix")
    fresh_directory(prefix)
    result = subprocess.run([cmake, "--install", build, "--prefix", prefix], capture_output=True, text=True, timeout=120)
    check(result.returncode == 0, f"cmake --install: exit {result.returncode}: {result.stderr.strip()}")
    site = os.path.join(prefix, "lib", "python3", "dist-packages")
    for file in ("__init__.py", "__init__.pyi", "_errors.py", "_output.py", "py.typed"):
        check(os.path.isfile(os.path.join(site, "attnbatch", file)), f"{file} was not installed")
    check(os.path.isfile(os.path.join(prefix, "bin", "attnbatch")), "the attnbatch binary was not installed")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    installed = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=120,
                               env=dict(env, PYTHONPATH=site), cwd=work)
    in_tree = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=120,
                             env=dict(env, PYTHONPATH=os.path.join(build, "python")), cwd=work)
    check(installed.returncode == 0, f"importing the installed package failed: {installed.stderr.strip()[-1500:]}")
    lines = installed.stdout.split()
    check(len(lines) == 2 and lines[0].startswith(site), f"attnbatch imported from {lines[:1]}, not from {site}")
    check(in_tree.returncode == 0 and installed.stdout.split()[1:] == in_tree.stdout.split()[1:],
          f"the installed module computes {installed.stdout.split()[1:]}, the build tree's {in_tree.stdout.split()[1:]}")
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
