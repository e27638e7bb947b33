"""Run by mpi_test.py under mpirun: attnbatch.run() on sub-communicators of MPI.COMM_WORLD.

usage: mpirun -np P python3 mpi_job.py INPUT OUTDIR

On 2 ranks: one group of both, in reversed rank order (key = -rank), so that the job's rank 0
is the world's rank 1. On 3 ranks: the world's ranks 0 and 1 run one job (OUTDIR/group0.h5),
rank 2 another on its own (OUTDIR/group1.h5). Afterwards MPI must still be usable (mpi4py
initialised it; attnbatch must not have finalised it) and each rank prints one line.
"""
import os
import sys

from mpi4py import MPI

import attnbatch

source, outdir = sys.argv[1], sys.argv[2]
world = MPI.COMM_WORLD
color = 0 if world.size <= 2 else (0 if world.rank < 2 else 1)
group = world.Split(color, -world.rank)
output = os.path.join(outdir, f"group{color}.h5")
attnbatch.run(source, output, comm=group, heads=4, causal=True, save_weights="all", progress="never")
try:
    attnbatch.run(source, output + ".bad.h5", comm=group, heads=3)  # 3 does not divide d = 64: every rank raises
except attnbatch.UsageError as e:
    agreed = f"UsageError {e.exit_code}"
else:
    agreed = "no error"
group.Barrier()
total = world.allreduce(1)  # MPI still up after the runs
size = group.size
group.Free()
print(f"rank {world.rank}: group {color} of {size} done; {agreed}; "
      f"world sum {total}; finalized={MPI.Is_finalized()}", flush=True)
