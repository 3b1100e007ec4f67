#!/usr/bin/env bash
# The main job: install, build, then on 4 local ranks: this node's topology, the reference GPT
# trained in a 3D layout through Strata (tensor parallel x pipeline: validation loss, a sample,
# build/strata-gpt-loss.svg), `strata-gpt validate` (DP, ZeRO, TP, SP, PP, TP x PP and CP against
# one rank, with its certification report in build/strata-gpt-report/; a mixture of experts under
# expert and context parallelism in build/strata-gpt-moe-report/), and an all-reduce sweep.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
export STRATA_TIMEOUT=${STRATA_TIMEOUT:-300}
run4() { build/bin/strata-run -n 4 --timeout 900 "$@"; }
build/bin/strata-topo
echo
echo "## strata-gpt train --config small, 4 ranks as tp2 x pp2 (1F1B, 4 micro-batches)"
run4 build/bin/strata-gpt train --config small --tp 2 --pp 2 --micro-batches 4 --eval-every 50 \
  --plot build/strata-gpt-loss.svg --json build/strata-gpt.json
echo
echo "## strata-gpt validate --config small, 4 ranks: layouts against one rank, with a report"
run4 build/bin/strata-gpt validate --config small --steps 10 \
  --layouts dp,dp.zero3,tp2,tp2.sp,pp2.1f1b,pp2.interleaved,tp2.pp2,tp2.sp.pp2.zero1,cp2,cp2.a2a \
  --report build/strata-gpt-report
echo
echo "## strata-gpt validate --config small --experts 4: expert-parallel layouts against one rank"
run4 build/bin/strata-gpt validate --config small --steps 10 --experts 4 --top-k 2 \
  --moe-every 2 \
  --layouts ep2,ep4,ep2.zero3,cp2.ep2 --report build/strata-gpt-moe-report
echo
echo "## strata-perf all_reduce, 4 ranks"
run4 build/bin/strata-perf all_reduce -b 8 -e 64M -f 8 -n 10 -w 3 -c 1
