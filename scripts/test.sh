#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: installs what is missing, builds with
# warnings as errors, runs every test through ctest (MPI tests included).
#   scripts/test.sh              Release build in build/
#   SANITIZE=1 scripts/test.sh   also the address+undefined build in build-asan/ (kernel tests)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

# Open MPI refuses root without these; tests run more ranks than this machine's cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

jobs=$(nproc)
BUILD_DIR=build scripts/build.sh -DATTNBATCH_WERROR=ON
(cd build && ctest --output-on-failure -j"$jobs" --timeout 900)

if [ "${SANITIZE:-0}" = 1 ]; then
  BUILD_DIR=build-asan scripts/build.sh -DATTNBATCH_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DATTNBATCH_SANITIZE=address,undefined
  (cd build-asan && ctest --output-on-failure -j"$jobs" --timeout 1800 -R "^kernels\.")
fi
