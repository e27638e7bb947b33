#!/usr/bin/env bash
# The main job on a fresh Debian machine: installs what is missing, builds, generates a demo
# dataset with projection weights, runs attnbatch under mpirun, then shows `inspect`,
# `verify` and a few values read back with h5py.
#   scripts/demo.sh [DIR]     (files go to DIR, default demo/)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

dir=${1:-demo}
mkdir -p "$dir"
bin=build/attnbatch
echo "== generate: 256 ragged sequences of up to 128 tokens, d = 64, 4 heads, projections"
"$bin" generate --output "$dir/in.h5" --weights-out "$dir/proj.h5" --num-seqs 256 --seq-len 128 \
  --min-len 16 --dim 64 --heads 4 --seed 42 --force

# Two ranks of one thread each on this 2-core machine; --bind-to none leaves thread placement
# to the OS (Open MPI otherwise pins each rank to one core); --oversubscribe lets the demo
# run on a one-core machine too.
echo "== mpirun -np 2 attnbatch run (causal, mean attention maps in f16)"
rm -f "$dir/out.h5"
mpirun -np 2 --oversubscribe --bind-to none "$bin" run --threads 1 --input "$dir/in.h5" --weights "$dir/proj.h5" --heads 4 --causal \
  --save-weights mean --weights-dtype f16 --output "$dir/out.h5" --report "$dir/report.json"

echo "== inspect"
"$bin" inspect "$dir/out.h5" | tail -n 4
echo "== verify (fp64 recomputation of 16 sequences)"
"$bin" verify --input "$dir/in.h5" --weights "$dir/proj.h5" --output "$dir/out.h5" --samples 16

echo "== read back with h5py"
/usr/bin/python3 - "$dir/out.h5" <<'PY'
import sys
import h5py
import numpy as np
with h5py.File(sys.argv[1], "r") as f:
    n = int(f["lengths"][0])
    print("datasets:", {k: (f[k].shape, str(f[k].dtype)) for k in ("output", "lse", "lengths", "attention")})
    print("complete:", f.attrs["complete"], "| sequence 0 has", n, "tokens")
    print("output[0, 0, :4] =", np.round(f["output"][0, 0, :4], 4))
    row = f["attention"][0, 0, n - 1, :n].astype(np.float64)
    print("mean attention of the last token over its", n, "keys sums to", round(row.sum(), 4))
PY
