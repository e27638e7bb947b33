# shellcheck shell=bash
# Which CPU a benchmark pins a turn of one-thread runs to (sourced by bench_precision.sh and
# bench_kernel.sh). The cores of a virtual machine need not be alike: on this project's 2-vCPU
# host one ran every kernel configuration 10-15% slower than the other for a while, so runs
# left to land on either core compared the cores as much as the configurations. Runs that are
# compared share a turn, and so a CPU; the CPUs this process may use take turns.

read -r -a allowed_cpus <<<"$(/usr/bin/python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))')"

# cpu_of_turn N: the CPU of turn N (0, 1, 2, ...).
cpu_of_turn() {
  echo "${allowed_cpus[$1 % ${#allowed_cpus[@]}]}"
}

# pin_for N OPTIONS: `taskset -c CPU` with the CPU of turn N when the bench OPTIONS run one
# thread, else nothing.
pin_for() {
  [[ " $2 " == *" --threads 1 "* ]] && echo "taskset -c $(cpu_of_turn "$1")"
  return 0
}
