#!/usr/bin/env bash
# Data-parallel scaling of strata-gpt: median step time on 2 ranks (DP, bucketed all-reduce
# overlapped with backward) over the median on 1 rank, at the same per-rank batch. 1.0 means the
# communication is completely hidden; the issue's target is <= 1.15.
#   benchmarks/compare_dp.sh [PER_RANK_BATCH] [extra strata-gpt flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-8}
shift || true
STEPS=${STEPS:-12}
ROUNDS=${ROUNDS:-3}
export OPENBLAS_NUM_THREADS=1 STRATA_TIMEOUT=${STRATA_TIMEOUT:-300}
median() {  # median step time in ms of a --json file, the first step left out
  python3 -c "
import json, sys; st = sorted(x['seconds'] for x in json.load(open('$1'))['steps'][1:])
print(f'{st[len(st) // 2] * 1e3:.1f}')"
}
common=(--config small --steps $((STEPS + 1)) --warmup 1 --eval-every 0 --sample 0 --quiet "$@")
echo "# strata-gpt DP scaling: per-rank batch $B, median of $STEPS steps, $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
  build/bin/strata-gpt train "${common[@]}" --batch "$B" --json /tmp/strata_dp1.json >/dev/null
  build/bin/strata-run -n 2 --timeout 600 build/bin/strata-gpt train "${common[@]}" \
    --batch $((2 * B)) --json /tmp/strata_dp2.json >/dev/null
  one=$(median /tmp/strata_dp1.json)
  two=$(median /tmp/strata_dp2.json)
  echo "round $r: 1 rank $one ms/step, 2 ranks (DP) $two ms/step, ratio $(python3 -c "print(f'{$two / $one:.3f}')")"
done
