#!/usr/bin/env bash
# Single-rank training throughput of strata-gpt against the same model in PyTorch on the CPU
# (benchmarks/gpt_torch.py), one thread each, alternating for ROUNDS rounds in one run.
#   benchmarks/compare_torch.sh [config flags...]     default: --config small --batch 16
# Installs torch from PyPI if it is missing. Prints one line per round and the median ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-10}
python3 -c "import torch" 2>/dev/null || pip install -q torch numpy
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--config small --batch 16)
# The model's dimensions as strata-gpt resolves them, for the PyTorch side.
dims=$(build/bin/strata-gpt train "${flags[@]}" --steps 1 --eval-every 0 --sample 0 --quiet \
         --json /tmp/strata_gpt_dims.json >/dev/null && python3 -c "
import json; j = json.load(open('/tmp/strata_gpt_dims.json')); c = j['config']
print(c['layers'], c['heads'], c['embd'], c['ctx'], j['global_batch'])")
read -r L H C T B <<<"$dims"
echo "# strata-gpt vs PyTorch $(python3 -c 'import torch; print(torch.__version__)'), 1 thread each:" \
     "L $L H $H C $C T $T batch $B, median of $STEPS steps after one warm-up"
ratios=()
for r in $(seq "$ROUNDS"); do
  OPENBLAS_NUM_THREADS=1 build/bin/strata-gpt train "${flags[@]}" --steps $((STEPS + 1)) \
    --warmup 1 --eval-every 0 --sample 0 --quiet --json /tmp/strata_gpt_bench.json >/dev/null
  s=$(python3 -c "
import json; st = [x['seconds'] for x in json.load(open('/tmp/strata_gpt_bench.json'))['steps'][1:]]
st.sort(); print(st[len(st) // 2] * 1e3)")
  t=$(python3 benchmarks/gpt_torch.py --layers "$L" --heads "$H" --embd "$C" --ctx "$T" \
        --batch "$B" --steps "$STEPS" --threads 1 | python3 -c "import json,sys; print(json.load(sys.stdin)['step_ms'])")
  ratio=$(python3 -c "print(f'{$s / $t:.2f}')")
  ratios+=("$ratio")
  printf "round %d: strata-gpt %.1f ms/step (%.0f tok/s)  pytorch %.1f ms/step (%.0f tok/s)  strata/torch time %s\n" \
    "$r" "$s" "$(python3 -c "print($B * $T / $s * 1e3)")" "$t" "$(python3 -c "print($B * $T / $t * 1e3)")" "$ratio"
done
echo "median strata/torch step-time ratio: $(printf '%s\n' "${ratios[@]}" | sort -n | sed -n "$(( (ROUNDS + 1) / 2 ))p") (target <= 2)"
