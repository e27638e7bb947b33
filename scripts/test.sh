#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: installs what is missing, builds with
# warnings as errors, runs every test through ctest (MPI tests included).
#   scripts/test.sh              Release build in build/
#   SANITIZE=1 scripts/test.sh   also the whole suite again in an address+undefined build in
#                                build-asan/ (leaks of Open MPI and libhdf5 suppressed, ours not:
#                                tests/sanitizers.supp)
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
  # Full unwinding and MCA components kept loaded: Open MPI's leaks then show stacks that
  # the suppressions can name (fast unwinding stops in libraries built without frame pointers).
  export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 OMPI_MCA_mca_base_component_disable_dlclose=1
  export LSAN_OPTIONS=suppressions=$PWD/tests/sanitizers.supp:print_suppressions=0:fast_unwind_on_malloc=0
  (cd build-asan && ctest --output-on-failure -j"$jobs" --timeout 1800)
fi
