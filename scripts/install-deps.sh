#!/usr/bin/env bash
# Installs the Debian packages attnbatch builds and tests with, without asking; does nothing
# when they are all present. Used by scripts/test.sh and scripts/demo.sh.
set -euo pipefail

packages=(
  g++ make cmake pkg-config
  libopenmpi-dev openmpi-bin
  libhdf5-openmpi-dev hdf5-tools
  libboost-program-options-dev
  libgtest-dev
  libxxhash-dev
  # import-weights parses the JSON header of safetensors files and Hugging Face config.json.
  nlohmann-json3-dev
  python3 python3-h5py python3-numpy python3-mpi4py
  # The Python module (src/python): pybind11 is header-only; python3-dev has Python's headers.
  pybind11-dev python3-dev
  # The tests against PyTorch's own attention (nn.MultiheadAttention), scripts/torch_to_weights.py,
  # and the test that outputs open in xarray by dimension name (engine h5netcdf).
  python3-torch python3-xarray python3-h5netcdf
  time
  # distributed.mpi.publish.fsync traces the sync calls of run --fsync on|off.
  strace
  # jobs/ and scripts/: linting and scaling plots; and the multi-node rig the job-script and
  # multi-node tests run on (tests/cluster/local-cluster.sh): network namespaces, a bridge and
  # tc from iproute2 (nsenter, unshare and flock come with util-linux, which every Debian
  # has), Slurm with one slurmd per node, munge (libpmix-dev ships the unversioned
  # libpmix.so that srun --mpi=pmix dlopen()s).
  shellcheck python3-matplotlib
  iproute2 munge slurmctld slurmd slurm-client libpmix-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
# munge and slurm* would start their system-wide services from postinst; the tests run their
# own daemons instead. Where the machine has no policy-rc.d, a temporary one stops that.
made_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo_cmd[@]}" tee /usr/sbin/policy-rc.d >/dev/null
  "${sudo_cmd[@]}" chmod 755 /usr/sbin/policy-rc.d
  made_policy=1
fi
remove_policy() { [ "$made_policy" = 1 ] && "${sudo_cmd[@]}" rm -f /usr/sbin/policy-rc.d; return 0; }
trap remove_policy EXIT
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}"
