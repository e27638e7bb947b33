#!/usr/bin/env bash
# Installs what is missing, builds, and runs attnbatch. Until the HDF5 pipeline lands this
# demo times the attention kernel on synthetic data against this machine's FMA peak.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
echo "== attnbatch bench: B=8 H=8 L=512 d=64, one thread, then all cores"
build/attnbatch bench --batch 8 --heads 8 --seq-len 512 --dim 64 --threads 1
build/attnbatch bench --batch 8 --heads 8 --seq-len 512 --dim 64
