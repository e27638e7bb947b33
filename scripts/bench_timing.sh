# shellcheck shell=bash
# Timing helpers shared by the end-to-end benchmark scripts (sourced; needs $out set).

# seconds of one command, to stdout; its own output to $out/last.log
timed() {
  local start end log=${out:?timed needs \$out}/last.log
  start=$EPOCHREALTIME
  "$@" >"$log" 2>&1 || { echo "command failed: $*" >&2; cat "$log" >&2; exit 1; }
  end=$EPOCHREALTIME
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f\n", b - a }'
}
