#!/usr/bin/env bash
# The transport's own floor for the cross-node latency figures: UCX's tag ping-pong between two
# emulated nodes (ucx_perftest tag_lat, 8 bytes; its latency column is half a round trip), with
# the UCX_TLS and device tools/strata-cluster sets for Strata. Run on a 2 x 1 cluster:
#   tools/strata-cluster -q --ranks 1,1 -- benchmarks/ucx_tag_floor.sh
# Rank 0 (node0, at $STRATA_STORE_ADDR) serves; rank 1 connects to it.
set -euo pipefail
args=(-t tag_lat -s 8 -n 200000)
if [ "${OMPI_COMM_WORLD_RANK:?run under tools/strata-cluster}" = 0 ]; then
  exec ucx_perftest "${args[@]}"
fi
sleep 1  # let the server listen first
exec ucx_perftest "${STRATA_STORE_ADDR:?}" "${args[@]}"
