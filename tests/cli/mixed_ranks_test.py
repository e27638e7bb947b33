#!/usr/bin/python3
"""Ranks on unlike CPUs compute on one backend: a bf16 run whose rank 0 may not use the AMX
tiles (ATTNBATCH_NO_AMX=1 there, as a node whose Linux refuses them) and whose rank 1 may. Every
rank then runs AVX512-BF16, which rounds otherwise than the tiles, so the output is the bits of
a run with the tiles off on every rank, and rank 0 warns once. (Before, rank 1 ran the tiles
and the sequences it computed differed from the same run on other ranks.)

usage: mixed_ranks_test.py ATTNBATCH MPIEXEC WORKDIR
"""
import json
import os
import subprocess
import sys

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, exit_status, fresh_directory, mpirun, skip  # noqa: E402

BIN, MPIEXEC, WORK = sys.argv[1:4]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
ENV.pop("ATTNBATCH_NO_AMX", None)
# Rank 0 without the tiles, the others as the machine allows.
RANK0_NO_AMX = 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then export ATTNBATCH_NO_AMX=1; fi; exec "$0" "$@"'


def run(command, env=ENV):
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=WORK, env=env)


def main():
    fresh_directory(WORK)
    probe = run([BIN, "bench", "--precision", "bf16", "--batch", "1", "--heads", "1", "--seq-len", "16", "--head-dim", "16",
                 "--repeats", "1", "--json"])
    if probe.returncode != 0 or json.loads(probe.stdout).get("matrix_unit") != "amx-bf16":
        skip("bf16 does not run on AMX tiles here, so no rank differs from another")
    made = run([BIN, "generate", "--output", "in.h5", "--num-seqs", "24", "--seq-len", "64", "--dim", "64", "--heads", "2"])
    check(made.returncode == 0, "generate: " + made.stderr)
    args = ["run", "--input", "in.h5", "--heads", "2", "--precision", "bf16", "--threads", "1", "--progress", "never"]
    mixed = run(mpirun(MPIEXEC, 2, ["sh", "-c", RANK0_NO_AMX, BIN, *args, "--output", "mixed.h5"]))
    check(mixed.returncode == 0, "the mixed run: exit %d, %s" % (mixed.returncode, mixed.stderr))
    warnings = [line for line in mixed.stderr.splitlines() if "not every rank has AMX tiles" in line]
    check(len(warnings) == 1, "the mixed run should warn once about the tiles: %r" % mixed.stderr)
    off = run(mpirun(MPIEXEC, 2, [BIN, *args, "--output", "off.h5"]), env=dict(ENV, ATTNBATCH_NO_AMX="1"))
    check(off.returncode == 0, "the run without tiles: exit %d, %s" % (off.returncode, off.stderr))
    on = run(mpirun(MPIEXEC, 2, [BIN, *args, "--output", "on.h5"]))
    check(on.returncode == 0 and "AMX" not in on.stderr, "the run with tiles: exit %d, %s" % (on.returncode, on.stderr))
    with h5py.File(os.path.join(WORK, "mixed.h5"), "r") as m, h5py.File(os.path.join(WORK, "off.h5"), "r") as o, \
            h5py.File(os.path.join(WORK, "on.h5"), "r") as t:
        check(m["output"][...].tobytes() == o["output"][...].tobytes(),
              "the mixed run's /output is not the bits of the run without tiles on every rank")
        check(m["lse"][...].tobytes() == o["lse"][...].tobytes(), "the mixed run's /lse differs from the run without tiles")
        # The check has teeth only where the two units round differently on this data.
        check(t["output"][...].tobytes() != o["output"][...].tobytes(),
              "the tiles and AVX512-BF16 gave the same bits here: this input cannot tell them apart")
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
