#!/usr/bin/env bash
# The emulated-cluster figures of benchmarks/RESULTS.md (issue 5): two nodes (network namespaces,
# tools/strata-cluster) with the link between them shaped to 1 Gbit/s, Strata's hierarchical
# collectives against its own flat algorithms (STRATA_ALGO) and against Open MPI (--compare mpi,
# ob1/tcp between the nodes, mpi_yield_when_idle 1), then latency and a size sweep unshaped, and
# the latency with one rank per node against UCX's own floor.
# Usage: benchmarks/compare_cluster.sh [outdir]   (after scripts/build.sh; needs root)
# The raw output goes to outdir (default build/bench-results/cluster, which git ignores),
# and benchmarks/pack_results.py packs it into one CSV beside it, outdir.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
invocation="benchmarks/compare_cluster.sh${*:+ $*} (at $(git rev-parse --short HEAD 2>/dev/null ||
  echo '?'))"
out=${1:-build/bench-results/cluster}
out=${out%/}
mkdir -p "$out"
flat="all_reduce=ring,all_gather=ring,reduce_scatter=ring,all_to_all=pairwise"

# run NAME LAYOUT RATE ALGO -- strata-perf args: one strata-perf run on a fresh cluster.
run() {
  local name=$1 layout=$2 rate=$3 algo=$4
  shift 5
  local f="$out/$name.txt"
  echo "== $f"
  local shaping=()
  [ "$rate" != none ] && shaping=(--rate "$rate")
  # shellcheck disable=SC2086
  STRATA_ALGO=$algo tools/strata-cluster -q $layout "${shaping[@]}" --timeout 580 \
    --mpirun-arg=-x --mpirun-arg=STRATA_ALGO \
    --mpirun-arg=--mca --mpirun-arg=mpi_yield_when_idle --mpirun-arg=1 \
    -- build/bin/strata-perf "$@" --compare mpi --json "$out/$name.json" > "$f" 2>&1 ||
    echo "failed: $f"
}

[ "${UNSHAPED_ONLY:-0}" = 1 ] || for layout in "2x4:--ranks 4,4" "2x2:--ranks 2,2"; do
  tag=${layout%%:*}
  for coll in all_reduce all_gather reduce_scatter; do
    run "${coll}_${tag}_1gbit_hier" "${layout#*:}" 1gbit "" -- "$coll" -b 16M -e 64M -f 4 -n 3 -w 1
    run "${coll}_${tag}_1gbit_flat" "${layout#*:}" 1gbit "$flat" -- "$coll" -b 16M -e 64M -f 4 -n 3 -w 1
  done
done
# Unshaped: 8-byte latency and the whole size range, hierarchical (the default) against flat.
for algo in hier flat; do
  a=""
  [ $algo = flat ] && a=$flat
  run "latency_2x2_${algo}" "--ranks 2,2" none "$a" -- all_reduce -b 8 -e 8 -n 1000 -w 100 -z 1
  run "all_reduce_2x2_unshaped_small_${algo}" "--ranks 2,2" none "$a" -- all_reduce -b 8 -e 64K -f 8 -n 200 -w 20
  run "all_reduce_2x2_unshaped_large_${algo}" "--ranks 2,2" none "$a" -- all_reduce -b 512K -e 64M -f 8 -n 5 -w 2
done
# One rank per node: the link's latency without four processes sharing two cores, and the floor
# under it, UCX's own tag ping-pong across the same veth.
run latency_2x1 "--ranks 1,1" none "" -- all_reduce -b 8 -e 8 -n 2000 -w 200 -z 1
tools/strata-cluster -q --ranks 1,1 --timeout 120 -- benchmarks/ucx_tag_floor.sh \
  > "$out/ucx_tag_lat_2x1.txt" 2>&1 || echo "failed: $out/ucx_tag_lat_2x1.txt"
benchmarks/pack_results.py "$out" "$out.csv" --section "Two emulated nodes (compare_cluster.sh)" \
  --command "${UNSHAPED_ONLY:+UNSHAPED_ONLY=$UNSHAPED_ONLY }$invocation" \
  --command "each NAME: STRATA_ALGO=ALGO tools/strata-cluster -q LAYOUT [--rate RATE] \
--timeout 580 --mpirun-arg=-x --mpirun-arg=STRATA_ALGO --mpirun-arg=--mca \
--mpirun-arg=mpi_yield_when_idle --mpirun-arg=1 -- build/bin/strata-perf ARGS --compare mpi \
--json NAME.json > NAME.txt (flat: ALGO=$flat)" \
  --command "tools/strata-cluster -q --ranks 1,1 --timeout 120 -- benchmarks/ucx_tag_floor.sh \
> ucx_tag_lat_2x1.txt"
echo "packed: $out.csv"
