#!/usr/bin/python3
"""fake_attnbatch.py - stands in for `attnbatch run` to test the job scripts' signal and
requeue protocol independently of the real binary: without --resume it reports itself started
(file STARTED.<rank> beside --output), waits up to 60 s for SIGUSR1 or SIGTERM and then exits 5
("checkpoint written"); with --resume it writes --output and exits 0. Like attnbatch, it sets
its handlers first and then unblocks the two signals: the job scripts start the ranks with
them blocked, and one that came since is taken then.
"""
import os
import signal
import sys
import time

args = sys.argv[1:]
if not args or args[0] != "run":
    print("fake_attnbatch: expected 'run'", file=sys.stderr)
    sys.exit(2)
out, resume = None, False
for i, arg in enumerate(args):
    if arg == "--output" and i + 1 < len(args):
        out = args[i + 1]
    elif arg == "--resume":
        resume = True
if not out:
    print("fake_attnbatch: no --output", file=sys.stderr)
    sys.exit(2)
# mpirun children inherit the batch step's SLURM_PROCID=0: ask Open MPI first.
rank = os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("PMIX_RANK") or os.environ.get("SLURM_PROCID") or "0"
if resume:
    print("fake_attnbatch rank %s: resumed, finishing" % rank, flush=True)
    if rank == "0":
        with open(out, "w") as f:
            f.write("finished\n")
    sys.exit(0)
got = []
for number in (signal.SIGUSR1, signal.SIGTERM):
    signal.signal(number, lambda received, frame: got.append(signal.Signals(received).name[3:]))
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1, signal.SIGTERM})
print("fake_attnbatch rank %s: started, waiting for a signal" % rank, flush=True)
open(os.path.join(os.path.dirname(out), "STARTED." + rank), "w").close()
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    if got:
        print("fake_attnbatch rank %s: SIG%s -> checkpoint written, exit 5" % (rank, got[0]), flush=True)
        sys.exit(5)
    time.sleep(0.1)
print("fake_attnbatch rank %s: no signal within 60 s" % rank, file=sys.stderr)
sys.exit(9)
