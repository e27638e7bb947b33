#!/usr/bin/python3
"""attnbatch.run() stops on a signal like the command: a SIGTERM after the first unit (the
command's fault injection, ATTNBATCH_FAULT=0:after_unit:1:signal) raises Interrupted (exit
code 5) with the command's one-line message; run(..., resume=True) then completes an output
whose datasets equal those of an uninterrupted run; and afterwards the caller's handlers are
back: Python's own SIGINT handler turns a SIGINT into KeyboardInterrupt again.

usage: signals_test.py WORKDIR
"""
import os
import signal
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, exit_status, fresh_directory  # noqa: E402

import attnbatch  # noqa: E402


def datasets(path):
    with h5py.File(path, "r") as f:
        return {name: f[name][()].tobytes() for name in ("output", "lse", "lengths", "attention")}


def main():
    work = sys.argv[1]
    fresh_directory(work)
    source = os.path.join(work, "in.h5")
    with h5py.File(source, "w") as f:
        f["embeddings"] = np.random.default_rng(9).standard_normal((12, 32, 32), dtype=np.float32)
    options = dict(heads=2, unit_sequences=2, progress="never")
    whole, stopped = os.path.join(work, "whole.h5"), os.path.join(work, "stopped.h5")
    attnbatch.run(source, whole, **options)

    term_before = signal.getsignal(signal.SIGTERM)
    os.environ["ATTNBATCH_FAULT"] = "0:after_unit:1:signal"
    try:
        attnbatch.run(source, stopped, **options)
    except attnbatch.Interrupted as e:
        print(f"Interrupted: exit code {e.exit_code}: {e.message}")
        check(e.exit_code == 5 and "SIGTERM" in e.message and "\n" not in e.message, "the Interrupted exception's code or message")
    else:
        check(False, "a run stopped by SIGTERM raised nothing")
    finally:
        del os.environ["ATTNBATCH_FAULT"]
    check(os.path.exists(stopped + ".partial") and not os.path.exists(stopped), "the stopped run left no OUTPUT.partial")
    attnbatch.run(source, stopped, resume=True, **options)
    check(datasets(stopped) == datasets(whole), "the resumed output differs from the uninterrupted one")

    check(signal.getsignal(signal.SIGTERM) == term_before, "the SIGTERM handler seen by Python changed")
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)  # Python runs its handler between bytecodes: here
    except KeyboardInterrupt:
        print("SIGINT after the runs: KeyboardInterrupt, Python's handler is back")
    else:
        check(False, "SIGINT after the runs did not raise KeyboardInterrupt: the caller's handler was not restored")
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
