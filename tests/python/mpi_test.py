#!/usr/bin/python3
"""An mpi4py job runs attnbatch on sub-communicators and writes what one rank writes.

usage: mpi_test.py ATTNBATCH MPIEXEC PYTHON WORKDIR

Writes an input (12 sequences, ragged), runs it with `attnbatch run` on one rank as the
reference, then mpi_job.py on 2 ranks (one sub-communicator of both, ranks reversed) and on 3
(a group of two and a group of one, two jobs at once): every output's /output, /lse,
/lengths and /attention must equal the reference's byte for byte; every rank must report the
agreed UsageError of a bad second run, MPI still initialised, and a clean exit.
"""
import os
import re
import subprocess
import sys

import h5py
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "support"))
from harness import check, exit_status, fresh_directory, mpi_env, mpirun, run_with_timeout  # noqa: E402


def datasets(path):
    with h5py.File(path, "r") as f:
        return {name: f[name][()].tobytes() for name in ("output", "lse", "lengths", "attention")}


def main():
    binary, mpiexec, python, work = sys.argv[1:5]
    fresh_directory(work)
    rng = np.random.default_rng(3)
    source = os.path.join(work, "in.h5")
    with h5py.File(source, "w") as f:
        f["embeddings"] = rng.standard_normal((12, 64, 64), dtype=np.float32)
        f["lengths"] = rng.integers(1, 65, 12).astype(np.int32)
    reference = os.path.join(work, "reference.h5")
    result = subprocess.run([binary, "run", "--input", source, "--output", reference, "--heads", "4", "--causal",
                             "--save-weights", "all"], capture_output=True, text=True, timeout=300)
    check(result.returncode == 0, f"the one-rank reference run failed: {result.stderr.strip()}")
    expected = datasets(reference)
    for ranks, groups in ((2, 1), (3, 2)):
        outdir = os.path.join(work, f"np{ranks}")
        fresh_directory(outdir)
        result = run_with_timeout(mpirun(mpiexec, ranks, [python, os.path.join(here, "mpi_job.py"), source, outdir]),
                                  300, env=mpi_env())
        if result is None:
            check(False, f"-np {ranks}: no end within 300 s")
            continue
        print(result.stdout, end="")
        check(result.returncode == 0, f"-np {ranks}: exit {result.returncode}: {result.stderr.strip()[-2000:]}")
        # By message, not by line: mpirun forwards each rank's output as it comes, and two
        # ranks' lines can land on one ("...finalized=Falserank 0: ...").
        lines = re.findall(r"rank \d+: [^\n]*?finalized=(?:True|False)", result.stdout)
        check(len(lines) == ranks, f"-np {ranks}: {len(lines)} ranks reported, expected {ranks}")
        check(all("UsageError 2" in line and f"world sum {ranks}" in line and "finalized=False" in line for line in lines),
              f"-np {ranks}: a rank missed the agreed error or found MPI finalised")
        for group in range(groups):
            path = os.path.join(outdir, f"group{group}.h5")
            if not os.path.exists(path):
                check(False, f"-np {ranks}: {path} was not written")
                continue
            got = datasets(path)
            for name, data in expected.items():
                check(got[name] == data, f"-np {ranks} group {group}: /{name} differs from the one-rank run's")
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
