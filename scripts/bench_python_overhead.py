#!/usr/bin/python3
"""The cost of calling the engine from Python: attnbatch.attention() against `attnbatch bench`
on the same shape, measured interleaved, medians.

usage: PYTHONPATH=build/python scripts/bench_python_overhead.py [--binary build/attnbatch]
           [--batch 16] [--heads 4] [--seq-len 512] [--head-dim 64] [--rounds 7] [--repeats 5]
           [--causal] [--threads N]

Each round runs `attnbatch bench --projections --json` and then times --repeats calls of
attention() (after one untimed call), in alternation, so that both see the same load of the
machine. Two comparisons, each the median over the rounds of per-round medians:

  overhead   attention(x, projections={w_q, w_k, w_v, w_o, biases}) on embeddings [B, L, d]
             against bench's "step" figure: run's step compute (StepComputer) on that shape
             with synthetic weights of the same shapes, timed in C++. Same work, same code:
             the difference is what the Python call adds (argument checks, a StepComputer
             and fresh output arrays per call, the GIL released and taken back).
  vs kernel  attention(q, k, v) on [B, L, H*d_k] against bench's kernel alone on synthetic
             Q, K, V [B, H, L, d_k] (no step path, no lengths): what the step path costs
             besides, for information.

The default shape is the one the issue names: B*H = 64, L = 512, d_k = 64 (d = H*d_k = 256).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "python"))
import attnbatch  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "attnbatch"))
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--threads", type=int, default=0)
    a = parser.parse_args()

    d = a.heads * a.head_dim
    rng = np.random.default_rng(1)
    x, q, k, v = (rng.standard_normal((a.batch, a.seq_len, d), dtype=np.float32) for _ in range(4))
    weights = {name: (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
               for name, shape in (("w_q", (d, d)), ("w_k", (d, d)), ("w_v", (d, d)), ("w_o", (d, d)))}
    weights.update({name: (rng.standard_normal(d) / np.sqrt(d)).astype(np.float32) for name in ("b_q", "b_k", "b_v", "b_o")})
    options = dict(heads=a.heads, causal=a.causal, threads=a.threads or None)
    calls = {"step": lambda: attnbatch.attention(x, projections=weights, **options),
             "kernel": lambda: attnbatch.attention(q, k, v, **options)}
    for call in calls.values():
        call()  # untimed: page faults, thread start-up
    bench = [a.binary, "bench", "--projections", "--batch", str(a.batch), "--heads", str(a.heads), "--seq-len",
             str(a.seq_len), "--head-dim", str(a.head_dim), "--repeats", str(a.repeats), "--threads", str(a.threads), "--json"]
    if a.causal:
        bench.append("--causal")
    seconds = {name: {"bench": [], "python": []} for name in calls}
    for round_number in range(a.rounds):
        result = json.loads(subprocess.run(bench, capture_output=True, text=True, check=True).stdout)
        seconds["step"]["bench"].append(result["step_median_seconds"])
        seconds["kernel"]["bench"].append(result["median_seconds"])
        for name, call in calls.items():
            times = []
            for _ in range(a.repeats):
                start = time.perf_counter()
                call()
                times.append(time.perf_counter() - start)
            seconds[name]["python"].append(statistics.median(times))
        print(f"round {round_number + 1} ({result['isa']}): " + ", ".join(
            f"{name}: bench {s['bench'][-1] * 1e3:.2f} ms, attention() {s['python'][-1] * 1e3:.2f} ms"
            for name, s in seconds.items()), flush=True)
    print(f"B={a.batch} H={a.heads} L={a.seq_len} d_k={a.head_dim}{' causal' if a.causal else ''}, "
          f"threads {a.threads or 'all'}, {a.rounds} rounds:")
    for name, label in (("step", "overhead (vs run's step compute, bench --projections)"),
                        ("kernel", "vs the kernel alone (bench), for information")):
        b, p = statistics.median(seconds[name]["bench"]), statistics.median(seconds[name]["python"])
        ratios = [pm / bm for pm, bm in zip(seconds[name]["python"], seconds[name]["bench"])]
        print(f"  {label}: bench {b * 1e3:.2f} ms, attention() {p * 1e3:.2f} ms, {p / b - 1:+.1%} "
              f"(per-round ratios: median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f})")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
