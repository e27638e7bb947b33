#!/usr/bin/python3
"""attnbatch.attention releases the GIL while the kernels run: a Python thread that counts
while the main thread is inside one long call makes progress during it.

A thread that needs the GIL to count (a pure-Python loop) would stall for the whole call if
the GIL were held; the test requires it to count on through most of the call.
"""
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, exit_status  # noqa: E402

import attnbatch  # noqa: E402


def main():
    rng = np.random.default_rng(1)
    one = rng.standard_normal((1, 1024, 256), dtype=np.float32)
    attnbatch.attention(one, heads=4, return_maps="all", threads=1)  # warm: the first call pays the page faults
    # Enough sequences for a call of about 0.3 s on this machine, whatever its speed and the
    # state of its memory (a fixed 8 took 0.056 s on one fast sitting: too short to show anything).
    start = time.perf_counter()
    attnbatch.attention(one, heads=4, return_maps="all", threads=1)
    per_sequence = time.perf_counter() - start
    n = int(min(64, max(8, np.ceil(0.3 / max(per_sequence, 1e-6)))))
    x = rng.standard_normal((n, 1024, 256), dtype=np.float32)
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            for _ in range(1000):  # pure Python: runs only while holding the GIL
                pass

    counter = threading.Thread(target=count)
    counter.start()
    time.sleep(0.05)
    start = time.perf_counter()
    attnbatch.attention(x, heads=4, return_maps="all", threads=1)
    end = time.perf_counter()
    stop.set()
    counter.join()
    during = [t for t in ticks if start <= t <= end]
    covered = (max(during) - min(during)) / (end - start) if len(during) > 1 else 0.0
    print(f"call {end - start:.3f} s; the counting thread ticked {len(during)} times during it, over {covered:.0%} of it")
    check(end - start > 0.1, f"the call took {end - start:.3f} s, too short to show anything")
    check(len(during) >= 20 and covered >= 0.5, "the counting thread stalled during the call: the GIL was held")
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
