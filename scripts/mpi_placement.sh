# shellcheck shell=bash
# Where mpirun puts a benchmark's ranks (sourced by bench_e2e.sh, bench_peer.sh and scaling.sh;
# docs/clusters.md "Placement"). Bound, each rank gets its share of this node's cores: its
# threads, and room for its writing thread, which otherwise takes turns with the compute (Open
# MPI's default binds even a lone rank to one core: one rank of one thread ran 1.29x slower so
# on this 2-core machine). With more ranks x threads than cores nothing is bound.

# rank_share RANKS THREADS: the cores each rank is bound to, or 0 when they do not fit.
rank_share() {
  local cores
  cores=$(nproc)
  if (( $1 * $2 <= cores )); then echo $((cores / $1)); else echo 0; fi
}

# placement core|none RANKS THREADS: mpirun's mapping and binding options for one node.
placement() {
  local share=0
  [[ $1 == core ]] && share=$(rank_share "$2" "$3")
  if (( share > 0 )); then echo "--map-by slot:PE=$share --bind-to core"; else echo "--bind-to none"; fi
}
