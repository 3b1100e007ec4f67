#!/usr/bin/env bash
# Expert- and context-parallel scaling of strata-gpt (issue 35's targets): the median step time
# on 2 ranks (ep2, or cp2) over the median on 1 rank at the same global batch, and the share of
# the 2-rank step that rank 0 waited on the axis's communication (exposed).
#   benchmarks/compare_split.sh ep [extra strata-gpt flags...]   # small, 4 experts top-2, every block
#     (WARM_STEPS=60 by default: both runs resume from 60 steps of ep2, once the aux loss has
#     spread the tokens over the experts; WARM_STEPS=0 times a fresh router)
#   benchmarks/compare_split.sh cp [extra strata-gpt flags...]   # small at context 1024 (ring;
#                                                                #   --cp-comm a2a for Ulysses)
set -euo pipefail
cd "$(dirname "$0")/.."
axis=${1:?usage: compare_split.sh ep|cp [strata-gpt flags...]}
shift
STEPS=${STEPS:-8}
ROUNDS=${ROUNDS:-3}
export OPENBLAS_NUM_THREADS=1 STRATA_TIMEOUT=${STRATA_TIMEOUT:-600}
case $axis in
  ep) model=(--experts 4 --top-k 2 --moe-every 1 --batch "${BATCH:-16}") ;;
  cp) model=(--ctx 1024 --batch "${BATCH:-4}") ;;
  *) echo "compare_split.sh: ep or cp, not '$axis'" >&2; exit 2 ;;
esac
summary() {  # median step ms, and the median exposed share of the axis, of a --json file
  python3 -c "
import json, sys
steps = json.load(open('$1'))['steps'][1:]
ms = sorted(s['seconds'] for s in steps)[len(steps) // 2] * 1e3
share = sorted(s['axes']['$axis']['exposed_seconds'] / s['seconds'] for s in steps)[len(steps) // 2]
print(f'{ms:.1f} {100 * share:.1f}')"
}
base=(--config small "${model[@]}" --warmup 1 --eval-every 0 --sample 0 --quiet "$@")
warm=0
if [[ $axis == ep ]]; then warm=${WARM_STEPS:-60}; fi
common=("${base[@]}" --steps $((warm + STEPS + 1)))
if ((warm > 0)); then
  # A fresh router in this small model sends every token to the same two experts in most
  # blocks (tokens 0/2048 an expert), and the ep rank holding both computes everything: a state
  # the aux loss leaves within tens of steps and a training run spends almost none of its time in.
  ckpt=$(mktemp -d /tmp/strata_split_warm.XXXXXX)
  trap 'rm -rf "$ckpt"' EXIT
  build/bin/strata-run -n 2 --timeout 900 build/bin/strata-gpt train "${base[@]}" --steps "$warm" \
    --ep 2 --save "$ckpt" >/dev/null
  common+=(--resume "$ckpt")
fi
echo "# strata-gpt $axis scaling: ${model[*]} $*, median of $STEPS steps after $warm, $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
  build/bin/strata-gpt train "${common[@]}" --json /tmp/strata_split1.json >/dev/null
  build/bin/strata-run -n 2 --timeout 900 build/bin/strata-gpt train "${common[@]}" --"$axis" 2 \
    --json /tmp/strata_split2.json >/dev/null
  read -r one _ < <(summary /tmp/strata_split1.json)
  read -r two exposed < <(summary /tmp/strata_split2.json)
  reference=""
  if [[ $axis == ep ]]; then  # the same model on 2 ranks with no exchange: what 2 cores give
    build/bin/strata-run -n 2 --timeout 900 build/bin/strata-gpt train "${common[@]}" \
      --json /tmp/strata_split2.json >/dev/null
    read -r dp2 _ < <(summary /tmp/strata_split2.json)
    reference=", dp2 $dp2 ms/step ($(python3 -c "print(f'{$dp2 / $one:.3f}')"))"
  fi
  echo "round $r: 1 rank $one ms/step, ${axis}2 $two ms/step, ratio" \
    "$(python3 -c "print(f'{$two / $one:.3f}')"), $axis exposed $exposed% of the step$reference"
done
