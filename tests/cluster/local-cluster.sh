#!/usr/bin/env bash
# local-cluster.sh - a cluster of N nodes on this one host, for the multi-node tests.
#
# Each node is a network namespace with its own address on a private bridge and a UTS
# namespace with its own host name (node1, node2, ...); all nodes share the file system, as a
# cluster shares its parallel file system. A "head" namespace runs slurmctld, every node runs
# its own slurmd (NodeName/NodeAddr), one munged serves them all (its socket is a file). Open
# MPI reaches the nodes through an rsh agent that enters a node's namespaces (rsh-agent.sh).
#
#   local-cluster.sh start [--nodes N] [--memory SIZE[,SIZE...]] [--cpus C]
#                          make the nodes and start Slurm on them; idempotent (a running rig
#                          of the same shape is kept). --memory: a memory cgroup per node
#                          with that limit (the node's own memory; one size, or one per node,
#                          e.g. 3G,2G), where this machine's cgroups allow it.
#   local-cluster.sh stop  cancel the jobs, stop the daemons, kill what runs in the nodes and
#                          remove every namespace, link, mount and cgroup the rig made (listed
#                          in its manifest), even after a failed start; idempotent.
#   local-cluster.sh status            exit 0 only when every daemon is up and every node idle
#   local-cluster.sh exec NODE CMD...  run CMD inside NODE (its network, host name, cgroup)
#   local-cluster.sh hostfile [--nodes K] [--slots S]   an mpirun hostfile for the first K nodes
#   local-cluster.sh env               `export ...` lines: SLURM_CONF and Open MPI's settings
#   local-cluster.sh wait JOB [S]      wait for a job (0.5 s polling); exit with its exit code
#   local-cluster.sh kill-node NODE    SIGKILL every process of NODE (slurmd included): a lost node
#   local-cluster.sh revive NODE       start NODE's slurmd again after kill-node
#   local-cluster.sh link NODE down|up|rate RATE|unlimited|show   cut, restore, throttle (tc tbf
#                                      both ways, e.g. rate 30mbit) NODE's link, or show its qdiscs
#   local-cluster.sh nodes             the node names, one a line
#   local-cluster.sh info              per node: name, address, memory limit in bytes and its
#                                      cgroup ("-" where none: the node has the host's memory)
#   local-cluster.sh check             exit 0 if this machine lets the rig run; else one line and 77
#
# Exit codes: 0 ok, 1 failure (with the log tails), 2 usage, 77 namespaces are not permitted
# here (the tests report themselves skipped with that line).
#
# Knobs: ATTNBATCH_CLUSTER_DIR (state, config, logs: /tmp/attnbatch-cluster),
# ATTNBATCH_CLUSTER_SUBNET (a /24 such as 10.213.7.0; default: the first of a few private /24s
# that no route or address of this host covers), ATTNBATCH_CLUSTER_TIMEOUT (60 s for start).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF=$HERE/$(basename "${BASH_SOURCE[0]}")
BASE=${ATTNBATCH_CLUSTER_DIR:-/tmp/attnbatch-cluster}
TIMEOUT=${ATTNBATCH_CLUSTER_TIMEOUT:-60}
# Every name the rig gives a kernel object starts with this, and is also in its manifest:
# stop removes only what the manifest lists.
TAG=abrig
BRIDGE=$TAG-br0
CONF=$BASE/etc/slurm.conf
MANIFEST=$BASE/manifest
NSDIR=$BASE/ns
MUNGE_SOCK=$BASE/munge/munge.socket.2
MUNGE_KEY=$BASE/munge-key/munge.key
MUNGE_PID=$BASE/run/munged.pid
CTLD_PID=$BASE/run/slurmctld.pid

log() { printf 'local-cluster: %s\n' "$*" >&2; }
die() { printf 'local-cluster: ERROR: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$SELF" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }

sl() { SLURM_CONF=$CONF "$@"; }

# ------------------------------------------------------------------ what this machine allows
# The one line a machine without namespaces gets (exit 77: the tests say "skipped" with it).
refusal() {
    [ "$(id -u)" = 0 ] || { echo "the multi-node rig needs root (network namespaces, bridges, daemons); running as $(id -un)"; return; }
    local c
    for c in ip unshare nsenter tc munged slurmctld slurmd sbatch; do
        command -v "$c" >/dev/null || { echo "the multi-node rig needs '$c' (scripts/install-deps.sh installs it)"; return; }
    done
    local err
    err=$(unshare --net --uts --mount true 2>&1) ||
        { echo "network namespaces are not permitted here (unshare --net --uts --mount: ${err##*: }); the multi-node rig cannot run"; return; }
    # The bridge and the veths live in this host's own network namespace (root in a user
    # namespace may make namespaces but not links here).
    if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
        err=$(ip link add "$TAG-probe" type bridge 2>&1) ||
            { echo "links cannot be made in this host's network namespace (ip link add: ${err##*: }); the multi-node rig cannot run"; return; }
        ip link del "$TAG-probe" 2>/dev/null || true
    fi
}

cmd_check() {
    local why
    why=$(refusal)
    [ -z "$why" ] || { echo "local-cluster: refused: $why"; exit 77; }
    echo "local-cluster: this machine permits the rig"
}

# ------------------------------------------------------------------ state and manifest
# manifest lines: "netns|link|mount|cgroup NAME" (what stop removes), "nodes N", "subnet A.B.C"
# (the /24), "shape ...", "memory-NODE BYTES", "cgroup-NODE DIR".
remember() { echo "$*" >>"$MANIFEST"; }
recorded() { [ -r "$MANIFEST" ] && awk -v k="$1" '$1 == k { print $2 }' "$MANIFEST"; return 0; }

NODES=0 SUBNET="" SHAPE=""
declare -A MEMORY=() CGROUP=()
load_manifest() {
    local key value
    NODES=0 SUBNET="" SHAPE=""
    MEMORY=() CGROUP=()
    [ -r "$MANIFEST" ] || return 0
    while read -r key value; do
        case $key in
            nodes) NODES=$value ;;
            subnet) SUBNET=$value ;;
            shape) SHAPE=$value ;;
            memory-*) MEMORY[${key#memory-}]=$value ;;
            cgroup-*) CGROUP[${key#cgroup-}]=$value ;;
        esac
    done <"$MANIFEST"
}

node_names() {
    local i
    for ((i = 1; i <= NODES; i++)); do echo "node$i"; done
}
# index NODE: 0 for head, I for nodeI; fails for anything else.
node_index() {
    case $1 in
        head) echo 0 ;;
        node[1-9]) [ "${1#node}" -le "$NODES" ] && echo "${1#node}" ;;
        *) return 1 ;;
    esac
}
compute_node() {
    if [[ $1 != node* ]] || ! node_index "$1" >/dev/null; then die "no compute node '$1' (nodes: $(node_names | tr '\n' ' '))"; fi
}
address_of() { echo "$SUBNET.$((10 + $(node_index "$1")))"; }  # head .10, nodeI .1I; this host .1
netns_of() { echo "$TAG-$1"; }
veth_of() { echo "$TAG-v$(node_index "$1")"; }  # the host side; inside the node it is eth0

# ------------------------------------------------------------------ the subnet
ip_to_int() { local IFS=.; read -r a b c d <<<"$1"; echo $(((a << 24) | (b << 16) | (c << 8) | d)); }

# Every IPv4 prefix this host routes or holds (all tables, all addresses), default routes aside.
host_prefixes() {
    ip -4 route show table all 2>/dev/null | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+(\/[0-9]+)?$/) { print $i; break } }'
    ip -4 -o addr show 2>/dev/null | awk '{ print $4 }'
}

# free A.B.C: no route or address of this host overlaps A.B.C.0/24.
free_subnet() {
    local net p addr len mask base
    net=$(ip_to_int "$1.0")
    while read -r p; do
        [ -n "$p" ] || continue
        addr=${p%/*}
        len=32
        [[ $p == */* ]] && len=${p#*/}
        [ "$len" -lt 24 ] && mask=$(((0xffffffff << (32 - len)) & 0xffffffff)) || mask=$((0xffffff00))
        base=$(ip_to_int "$addr")
        [ $((base & mask)) = $((net & mask)) ] && return 1
    done < <(host_prefixes)
    return 0
}

choose_subnet() {
    local s
    if [ -n "${ATTNBATCH_CLUSTER_SUBNET:-}" ]; then
        s=${ATTNBATCH_CLUSTER_SUBNET%.0}
        s=${s%.0/24}
        [[ $s =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "ATTNBATCH_CLUSTER_SUBNET=$ATTNBATCH_CLUSTER_SUBNET: expected a /24 as A.B.C.0"
        free_subnet "$s" || die "ATTNBATCH_CLUSTER_SUBNET=$s.0/24 overlaps a route or address of this host (ip route); choose another"
        echo "$s"
        return
    fi
    for s in 10.213.7 10.213.8 172.29.213 192.168.213 10.247.13; do
        free_subnet "$s" && { echo "$s"; return; }
    done
    die "every candidate subnet overlaps a route of this host; set ATTNBATCH_CLUSTER_SUBNET"
}

# ------------------------------------------------------------------ processes
# The processes whose network namespace is NODE's.
pids_in() {
    local ns inode
    ns=/run/netns/$(netns_of "$1")
    [ -e "$ns" ] || return 0
    inode=$(stat -L -c %i "$ns" 2>/dev/null) || return 0
    stat -L -c '%i %n' /proc/[0-9]*/ns/net 2>/dev/null | awk -v i="$inode" '$1 == i { split($2, p, "/"); print p[3] }'
    return 0
}

pid_alive() {  # pid_alive FILE NAME: the pid in FILE, when it runs NAME
    local pid
    [ -r "$1" ] || return 1
    pid=$(tr -dc '0-9' <"$1")
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] && echo "$pid"
}

stop_pids() {  # stop_pids PID...: TERM to all, then KILL to those left after 5 s
    [ $# -gt 0 ] || return 0
    kill -TERM "$@" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$@" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$@" 2>/dev/null || true
}

kill_node_processes() {  # kill_node_processes NODE: SIGKILL all, wait until gone (5 s)
    local pids
    for _ in $(seq 1 50); do
        mapfile -t pids < <(pids_in "$1")
        [ ${#pids[@]} = 0 ] && return 0
        kill -KILL "${pids[@]}" 2>/dev/null || true
        sleep 0.1
    done
    log "processes still in $1 after SIGKILL: ${pids[*]}"
}

# ------------------------------------------------------------------ entering a node
# The node's cgroup first (the process joins it, and what it execs stays there), then its
# network and UTS namespaces.
enter() {  # enter NODE CMD...
    local node=$1 cg
    shift
    node_index "$node" >/dev/null || die "no node '$node' in this rig (nodes: head $(node_names | tr '\n' ' '))"
    [ -e "/run/netns/$(netns_of "$node")" ] || die "node '$node' does not exist (is the rig started? $SELF start)"
    cg=${CGROUP[$node]:-}
    if [ -n "$cg" ]; then echo "$BASHPID" >"$cg/cgroup.procs" || die "cannot join $cg"; fi
    exec nsenter --net="/run/netns/$(netns_of "$node")" --uts="$NSDIR/$node.uts" -- "$@"
}

# ------------------------------------------------------------------ memory cgroups
# Where this process's memory cgroup is: v1 (a memory hierarchy) or v2 (memory enabled for
# children of our cgroup). Echoes the directory under which the nodes' cgroups go.
memory_cgroup_parent() {
    local line path
    while IFS= read -r line; do
        path=${line#*:*:}
        case $line in
            *:memory:*) [ -d "/sys/fs/cgroup/memory$path" ] && { echo "/sys/fs/cgroup/memory$path"; return; } ;;
        esac
    done </proc/self/cgroup
    while IFS= read -r line; do
        case $line in
            0::*) path=${line#0::}
                  local root
                  for root in /sys/fs/cgroup /sys/fs/cgroup/unified; do
                      [ -f "$root$path/cgroup.subtree_control" ] || continue
                      grep -qw memory "$root$path/cgroup.subtree_control" && { echo "$root$path"; return; }
                  done ;;
        esac
    done </proc/self/cgroup
    return 1
}

to_bytes() {  # 3G, 512M, 1048576
    local v=$1
    case $v in
        *[gG]) echo $((${v%?} << 30)) ;;
        *[mM]) echo $((${v%?} << 20)) ;;
        *[kK]) echo $((${v%?} << 10)) ;;
        *[0-9]) echo "$v" ;;
        *) die "--memory $v: expected a size such as 3G or 512M" ;;
    esac
}

make_node_cgroup() {  # make_node_cgroup NODE BYTES
    local parent dir file
    parent=$(memory_cgroup_parent) || { log "no memory cgroup to limit $1 with (cgroup v1 memory hierarchy or v2 with memory delegated); its memory is /proc/meminfo's"; return 0; }
    dir=$parent/$TAG-$1
    mkdir -p "$dir" || { log "cannot make $dir; $1's memory is /proc/meminfo's"; return 0; }
    remember cgroup "$dir"
    file=$dir/memory.max
    [ -e "$file" ] || file=$dir/memory.limit_in_bytes
    echo "$2" >"$file" || die "cannot set $file to $2"
    remember "cgroup-$1" "$dir"
    remember "memory-$1" "$2"
    CGROUP[$1]=$dir MEMORY[$1]=$2
}

# ------------------------------------------------------------------ Slurm configuration
write_config() {
    local cpus=$1 node mem hw
    hw=$(slurmd -C | head -n1 | sed 's/^NodeName=[^ ]* //; s/ *UpTime=.*//; s/RealMemory=[0-9]*//')
    [ -n "$cpus" ] && hw="CPUs=$cpus"
    mkdir -p "$BASE/etc"
    cat >"$CONF" <<EOF
# Written by local-cluster.sh start: $NODES nodes in network namespaces on one host.
ClusterName=attnbatch-rig
SlurmctldHost=head($(address_of head))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCK
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$BASE/state
SlurmdSpoolDir=$BASE/spool/%n
SlurmdPidFile=$BASE/run/slurmd-%n.pid
SlurmdLogFile=$BASE/log/slurmd-%n.log
SlurmctldPidFile=$CTLD_PID
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmctldDebug=info
SlurmdDebug=info
TmpFS=$BASE/tmp/%n
PlugStackConfig=$BASE/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$BASE/log/jobcomp.txt
MinJobAge=3600
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
EnforcePartLimits=ALL
MpiDefault=none
# A killed or unreachable node is DOWN after 30 s without an answer (300 s is Slurm's
# default); ReturnToService=2 takes it back when its slurmd registers again.
SlurmdTimeout=30
ReturnToService=2
InactiveLimit=0
KillWait=10
MailProg=/bin/true
${cpus:+SlurmdParameters=config_overrides}
EOF
    for node in $(node_names); do
        mem=${MEMORY[$node]:-}
        [ -n "$mem" ] && mem="RealMemory=$((mem >> 20))" || mem=""
        echo "NodeName=$node NodeAddr=$(address_of "$node") NodeHostname=$node $hw $mem State=UNKNOWN" >>"$CONF"
    done
    echo "PartitionName=debug Nodes=node[1-$NODES] Default=YES MaxTime=INFINITE State=UP" >>"$CONF"
    : >"$BASE/etc/plugstack.conf"
}

# Open MPI for mpirun started on this host (the "login node"): the nodes are reached by the
# rig's rsh agent; its sockets stay on the rig's subnet. rtc ^hwloc: several orted on one
# host crashed in hwloc's shared-memory topology write (2 of 13 launches) and never without
# it; routed direct: a relaunch onto a node whose processes were killed failed to route
# through the default tree. Keepalives on the daemons' connections: a node whose link is cut
# is declared lost after 5 + 3 x 2 = 11 s of silence (Open MPI's defaults: 300 + 9 x 20 s).
write_env() {
    cat >"$BASE/env" <<EOF
export ATTNBATCH_CLUSTER_DIR=$BASE
export SLURM_CONF=$CONF
export OMPI_MCA_plm_rsh_agent=$HERE/rsh-agent.sh
export OMPI_MCA_plm_rsh_no_tree_spawn=1
export OMPI_MCA_oob_tcp_if_include=$SUBNET.0/24
export OMPI_MCA_btl_tcp_if_include=$SUBNET.0/24
export OMPI_MCA_rtc=^hwloc
export OMPI_MCA_routed=direct
export OMPI_MCA_oob_tcp_keepalive_time=5
export OMPI_MCA_oob_tcp_keepalive_intvl=2
export OMPI_MCA_oob_tcp_keepalive_probes=3
EOF
}

# ------------------------------------------------------------------ status helpers
nodes_idle() {  # all nodes idle (or busy with jobs), none down
    local states
    states=$(sl sinfo -h -N -o '%N %T' 2>/dev/null) || return 1
    [ "$(grep -cE ' (idle|mixed|allocated|completing)$' <<<"$states")" = "$NODES" ]
}

daemons_up() {
    local node
    pid_alive "$MUNGE_PID" munged >/dev/null && pid_alive "$CTLD_PID" slurmctld >/dev/null || return 1
    for node in $(node_names); do pid_alive "$BASE/run/slurmd-$node.pid" slurmd >/dev/null || return 1; done
}

dump_logs() {
    local f
    for f in "$BASE"/log/*.log "$BASE"/log/*.out; do
        [ -s "$f" ] && { echo "----- tail $f" >&2; tail -n 15 "$f" >&2; }
    done
    return 0
}

start_slurmd() {  # start_slurmd NODE
    rm -f "$BASE/run/slurmd-$1.pid"
    mkdir -p "$BASE/spool/$1" "$BASE/tmp/$1"
    # Started from a subshell that enters the node; slurmd daemonizes there.
    # 9>&-: the daemons must not inherit the lock of start and stop (serialize).
    ("$SELF" exec "$1" slurmd -f "$CONF" -N "$1" </dev/null >>"$BASE/log/slurmd-$1.out" 2>&1 9>&-) ||
        { dump_logs; die "slurmd on $1 failed to start"; }
}

wait_until_idle() {
    local deadline=$((SECONDS + TIMEOUT))
    until nodes_idle; do
        if [ $SECONDS -ge $deadline ]; then
            sl sinfo -N >&2 2>/dev/null || true
            dump_logs
            return 1
        fi
        sleep 0.3
    done
}

# ------------------------------------------------------------------ commands
cmd_start() {
    local nodes=4 memory="" cpus=""
    while [ $# -gt 0 ]; do
        case $1 in
            --nodes) nodes=${2:-}; shift 2 ;;
            --memory) memory=${2:-}; shift 2 ;;
            --cpus) cpus=${2:-}; shift 2 ;;
            *) usage ;;
        esac
    done
    [[ $nodes =~ ^[1-9]$ ]] || die "--nodes $nodes: expected 1 to 9"
    [ -z "$cpus" ] || [[ $cpus =~ ^[1-9][0-9]*$ ]] || die "--cpus $cpus: expected a positive count"
    local why
    why=$(refusal)
    [ -z "$why" ] || { echo "local-cluster: refused: $why" >&2; exit 77; }
    local shape="nodes=$nodes memory=${memory:-none} cpus=${cpus:-detected}"
    if [ "$SHAPE" = "$shape" ] && daemons_up && nodes_idle; then
        log "already running ($shape); config $CONF"
        return 0
    fi
    if [ -r "$MANIFEST" ]; then
        log "clearing what an earlier start left (${SHAPE:-unknown shape})"
        cmd_stop quiet
    fi
    local t0=$SECONDS
    # Whatever ends the start early (a failed command, die) removes what it made.
    trap 'rc=$?; [ $rc = 0 ] || { log "start failed; removing what it made"; cmd_stop quiet; }; exit $rc' EXIT
    local d
    for d in etc state spool tmp run log munge ns; do rm -rf "${BASE:?}/$d"; done
    mkdir -p "$BASE"/{etc,state,spool,tmp,run,log,munge,munge-key} "$NSDIR"
    SHAPE=$shape NODES=$nodes SUBNET=$(choose_subnet)
    : >"$MANIFEST"
    remember shape "$SHAPE"
    remember nodes "$NODES"
    remember subnet "$SUBNET"

    # The namespace files live on a private mount (a bind of the directory onto itself), so
    # that a bind-mounted namespace stays this rig's and does not propagate anywhere.
    mount --bind "$NSDIR" "$NSDIR" && remember mount "$NSDIR"
    mount --make-private "$NSDIR"

    ip link add "$BRIDGE" type bridge && remember link "$BRIDGE"
    ip addr add "$SUBNET.1/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    local node i mem
    IFS=, read -r -a mem <<<"$memory"
    for node in head $(node_names); do
        ip netns add "$(netns_of "$node")" && remember netns "$(netns_of "$node")"
        touch "$NSDIR/$node.uts"
        unshare --uts="$NSDIR/$node.uts" hostname "$node" && remember mount "$NSDIR/$node.uts"
        ip link add "$(veth_of "$node")" type veth peer name "$TAG-p$(node_index "$node")" && remember link "$(veth_of "$node")"
        ip link set "$TAG-p$(node_index "$node")" netns "$(netns_of "$node")"
        ip -n "$(netns_of "$node")" link set "$TAG-p$(node_index "$node")" name eth0
        ip -n "$(netns_of "$node")" addr add "$(address_of "$node")/24" dev eth0
        ip -n "$(netns_of "$node")" link set eth0 up
        ip -n "$(netns_of "$node")" link set lo up
        ip link set "$(veth_of "$node")" master "$BRIDGE" up
        i=$(node_index "$node")
        if [ "$i" -gt 0 ] && [ ${#mem[@]} -gt 0 ]; then
            local bytes
            bytes=$(to_bytes "${mem[$(((i - 1) % ${#mem[@]}))]}")
            make_node_cgroup "$node" "$bytes"
        fi
    done

    # munged on this host: every node reaches it through its socket file.
    if [ ! -s "$MUNGE_KEY" ]; then
        mungekey --create --keyfile="$MUNGE_KEY" 2>/dev/null || dd if=/dev/urandom of="$MUNGE_KEY" bs=1024 count=1 status=none
    fi
    chmod 0700 "$BASE/munge-key"
    chmod 0600 "$MUNGE_KEY"
    chmod 0755 "$BASE" "$BASE/munge"
    munged --socket="$MUNGE_SOCK" --key-file="$MUNGE_KEY" --pid-file="$MUNGE_PID" \
        --seed-file="$BASE/munge-key/munged.seed" --log-file="$BASE/log/munged.log" \
        </dev/null >>"$BASE/log/munged.out" 2>&1 9>&- || { dump_logs; die "munged failed to start"; }
    for _ in $(seq 1 50); do [ -S "$MUNGE_SOCK" ] && break; sleep 0.1; done
    munge -S "$MUNGE_SOCK" -n </dev/null 2>/dev/null | unmunge -S "$MUNGE_SOCK" >/dev/null 2>&1 ||
        { dump_logs; die "munge credential round trip failed"; }

    write_config "$cpus"
    write_env
    cp /dev/null "$BASE/hostfile"
    for node in $(node_names); do echo "$node slots=${cpus:-$(nproc)}" >>"$BASE/hostfile"; done
    unset SLURM_CONF
    ("$SELF" exec head slurmctld -f "$CONF" </dev/null >>"$BASE/log/slurmctld.out" 2>&1 9>&-) ||
        { dump_logs; die "slurmctld failed to start"; }
    for node in $(node_names); do start_slurmd "$node"; done
    wait_until_idle || die "the nodes are not idle after ${TIMEOUT}s"
    trap - EXIT
    log "up in $((SECONDS - t0))s: $NODES nodes on $SUBNET.0/24 ($shape); config $CONF; eval \"\$($0 env)\" for sbatch/mpirun"
}

cmd_stop() {
    local quiet=${1:-}
    [ "$(id -u)" = 0 ] || die "must run as root"
    [ -r "$MANIFEST" ] || { [ -n "$quiet" ] || log "nothing to stop (no $MANIFEST)"; return 0; }
    if pid_alive "$CTLD_PID" slurmctld >/dev/null; then
        local jobs
        jobs=$(sl squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ') || jobs=""
        if [ -n "${jobs// /}" ]; then
            # shellcheck disable=SC2086 # job ids, one word each
            sl scancel $jobs 2>/dev/null || true
        fi
    fi
    local node pid daemons=()
    for node in $(node_names); do pid=$(pid_alive "$BASE/run/slurmd-$node.pid" slurmd) && daemons+=("$pid"); done
    pid=$(pid_alive "$CTLD_PID" slurmctld) && daemons+=("$pid")
    stop_pids "${daemons[@]}"
    for node in head $(node_names); do kill_node_processes "$node"; done
    pid=$(pid_alive "$MUNGE_PID" munged) && stop_pids "$pid"
    local item
    # Reverse order of creation: cgroups (now empty), links, namespaces, then the mounts.
    for item in $(recorded cgroup | tac); do rmdir "$item" 2>/dev/null || log "cannot remove cgroup $item"; done
    for item in $(recorded link | tac); do ip link del "$item" 2>/dev/null || true; done
    for item in $(recorded netns | tac); do ip netns del "$item" 2>/dev/null || true; done
    for item in $(recorded mount | tac); do umount "$item" 2>/dev/null || true; done
    rm -f "$MANIFEST" "$BASE/env" "$BASE/hostfile"
    [ -n "$quiet" ] || log "stopped; logs kept in $BASE/log until the next start"
}

cmd_status() {
    [ -r "$MANIFEST" ] || { echo "not started (no $MANIFEST)"; return 3; }
    echo "shape: $SHAPE, subnet $SUBNET.0/24, config $CONF"
    local rc=0 node pid
    for node in munged slurmctld; do
        local file=$MUNGE_PID
        [ $node = slurmctld ] && file=$CTLD_PID
        if pid=$(pid_alive "$file" "$node"); then echo "$node: running (pid $pid)"; else echo "$node: not running"; rc=3; fi
    done
    for node in $(node_names); do
        if pid=$(pid_alive "$BASE/run/slurmd-$node.pid" slurmd); then
            echo "slurmd $node ($(address_of "$node")): running (pid $pid)"
        else
            echo "slurmd $node: not running"; rc=3
        fi
    done
    if [ $rc = 0 ]; then
        sl sinfo -N -o '%N %T %c %m' || rc=3
        nodes_idle || rc=3
    fi
    return $rc
}

cmd_hostfile() {
    local count slots
    count=$NODES slots=""
    while [ $# -gt 0 ]; do
        case $1 in
            --nodes) count=$2; shift 2 ;;
            --slots) slots=$2; shift 2 ;;
            *) usage ;;
        esac
    done
    [ -n "$NODES" ] || die "the rig is not started"
    if [[ ! $count =~ ^[1-9]$ ]] || [ "$count" -gt "$NODES" ]; then die "--nodes $count: the rig has $NODES nodes"; fi
    local node
    for node in $(node_names | head -n "$count"); do echo "$node slots=${slots:-$(nproc)}"; done
}

cmd_wait() {
    local job=${1:-} limit=${2:-3600} out line rc=0 code sig deadline
    [[ $job =~ ^[0-9]+(_[0-9]+)?$ ]] || die "usage: $0 wait JOBID [TIMEOUT_S]"
    deadline=$((SECONDS + limit))
    while :; do
        out=$(sl scontrol -o show job "$job" 2>&1) || die "scontrol show job $job: $out"
        grep -qE 'JobState=(PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|REQUEUED|RESIZING|SIGNALING|STAGE_OUT|REQUEUE_HOLD|REQUEUE_FED)' <<<"$out" || break
        [ $SECONDS -lt $deadline ] || { log "job $job still not finished after ${limit}s"; return 124; }
        sleep 0.5
    done
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        code=$(grep -oE ' ExitCode=[0-9]+:[0-9]+' <<<"$line" | head -n1 | cut -d= -f2)
        sig=${code#*:} code=${code%:*}
        [ "${sig:-0}" != 0 ] && code=$((128 + sig))
        [ "${code:-0}" -gt "$rc" ] && rc=$code
        echo "$(grep -oE '^JobId=[0-9]+' <<<"$line") $(grep -oE 'ArrayTaskId=[0-9]+ ' <<<"$line")$(grep -oE 'JobState=[A-Z_]+' <<<"$line") $(grep -oE ' ExitCode=[0-9:]+' <<<"$line" | tr -d ' ')"
    done <<<"$out"
    return "$rc"
}

cmd_link() {
    local node=${1:-} what=${2:-} veth
    node_index "$node" >/dev/null || die "no node '$node'"
    veth=$(veth_of "$node")
    case $what in
        down) ip link set "$veth" down ;;
        up) ip link set "$veth" up ;;
        rate)
            [[ ${3:-} =~ ^[0-9]+[kmg]?bit$ ]] || die "link $node rate RATE: expected e.g. 30mbit"
            # tbf shapes what leaves an interface: the host side's egress is the node's
            # ingress, eth0's inside the node its egress. No netem on this kernel: no delay.
            tc qdisc replace dev "$veth" root tbf rate "$3" burst 64kb latency 400ms
            tc -n "$(netns_of "$node")" qdisc replace dev eth0 root tbf rate "$3" burst 64kb latency 400ms ;;
        unlimited)
            tc qdisc del dev "$veth" root 2>/dev/null || true
            tc -n "$(netns_of "$node")" qdisc del dev eth0 root 2>/dev/null || true ;;
        show)
            echo "to $node ($veth):"
            tc -s qdisc show dev "$veth" root
            echo "from $node (eth0):"
            tc -n "$(netns_of "$node")" -s qdisc show dev eth0 root ;;
        *) die "usage: $0 link NODE down|up|rate RATE|unlimited|show" ;;
    esac
}

# One start or stop at a time (two test runs may share the machine).
serialize() {
    mkdir -p "$BASE"
    exec 9>"$BASE/lock"
    flock 9
    load_manifest
}

load_manifest
case ${1:-} in
    start) shift; serialize; cmd_start "$@" ;;
    stop) serialize; cmd_stop ;;
    status) cmd_status ;;
    exec) shift; [ $# -ge 2 ] || usage; enter "$@" ;;
    hostfile) shift; cmd_hostfile "$@" ;;
    env) [ -r "$BASE/env" ] || die "the rig is not started"; cat "$BASE/env" ;;
    wait) shift; cmd_wait "$@" ;;
    kill-node) compute_node "${2:-}"; kill_node_processes "$2"; rm -f "$BASE/run/slurmd-$2.pid" ;;
    revive) compute_node "${2:-}"; start_slurmd "$2"; wait_until_idle || die "$2 is not idle again after ${TIMEOUT}s" ;;
    link) shift; cmd_link "$@" ;;
    nodes) node_names ;;
    info) for n in $(node_names); do echo "$n $(address_of "$n") ${MEMORY[$n]:--} ${CGROUP[$n]:--}"; done ;;
    check) cmd_check ;;
    *) usage ;;
esac
