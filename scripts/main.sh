#!/usr/bin/env bash
# The main job: install, build, then on 4 local ranks show the node's topology and sweep the
# bandwidth of the collectives (nccl-tests style tables, checked element by element).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
export STRATA_TIMEOUT=${STRATA_TIMEOUT:-120}
build/bin/strata-topo
for coll in all_reduce reduce_scatter all_gather all_to_all broadcast; do
  echo
  echo "## strata-perf $coll, 4 ranks (strata-run)"
  build/bin/strata-run -n 4 --timeout 600 build/bin/strata-perf "$coll" -b 8 -e 64M -f 8 -n 10 -w 3 -c 1
done
