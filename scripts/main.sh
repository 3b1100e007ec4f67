#!/usr/bin/env bash
# The main job: install, build, then on 4 local ranks: this node's topology, the reference GPT
# trained data-parallel through Strata (validation loss, a sample, build/strata-gpt-loss.svg),
# `strata-gpt validate` (every layout against one rank), and an all-reduce bandwidth sweep.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
export STRATA_TIMEOUT=${STRATA_TIMEOUT:-300}
run4() { build/bin/strata-run -n 4 --timeout 900 "$@"; }
build/bin/strata-topo
echo
echo "## strata-gpt train --config small, 4 ranks (DP, bucketed all-reduce overlapped with backward)"
run4 build/bin/strata-gpt train --config small --eval-every 50 \
  --plot build/strata-gpt-loss.svg --json build/strata-gpt.json
echo
echo "## strata-gpt validate --config small, 4 ranks: DP and ZeRO-1/2/3 against one rank"
run4 build/bin/strata-gpt validate --config small
echo
echo "## strata-perf all_reduce, 4 ranks"
run4 build/bin/strata-perf all_reduce -b 8 -e 64M -f 8 -n 10 -w 3 -c 1
