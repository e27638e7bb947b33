#!/usr/bin/env bash
# rsh-agent.sh [OPTIONS] NODE COMMAND... - Open MPI's plm_rsh_agent for the rig
# (local-cluster.sh env sets it): runs COMMAND, one shell command line as ssh would take it,
# inside NODE's namespaces. Options ssh would take are ignored.
set -euo pipefail
while [[ ${1:-} == -* ]]; do shift; done
[ $# -ge 2 ] || { echo "usage: $0 NODE COMMAND..." >&2; exit 2; }
node=$1
shift
exec "$(dirname "$0")/local-cluster.sh" exec "$node" /bin/sh -c "$*"
