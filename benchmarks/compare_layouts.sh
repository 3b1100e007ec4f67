#!/usr/bin/env bash
# The 3D trainer's figures (issue 19), each from strata-gpt's own --json, raw files in OUT:
#   bubble   pipeline bubble per stage and of the pipeline (mean over stages: 1 - compute /
#            (p x the longest stage's passes)) against the ideal, p = 2 on 2 ranks and p = 4 on
#            4 ranks, GPipe, 1F1B and interleaved (v = 2), m = 4 and 8; small with 8 layers, so
#            that every (virtual) stage holds the same number of blocks
#   tp       small, tp2 on 2 ranks against one rank, same global batch: median step time ratio
#   memory   parameters, gradients and optimizer bytes per rank against the formula, 8 ranks,
#            tp2 x pp2 x dp2 under ZeRO 0-3 (one step each)
#   cluster  2 emulated nodes x 4 ranks, 1 Gbit/s: tp4 x pp2 with tp inside the nodes (the mesh's
#            proposal) against the same sizes with tp across them (ranks round-robin over nodes)
#   benchmarks/compare_layouts.sh [OUT] [bubble|tp|memory|cluster ...]
# OUT defaults to build/bench-results/layouts (git ignores it); benchmarks/pack_results.py
# then packs it into one file beside it, OUT.json.
set -euo pipefail
cd "$(dirname "$0")/.."
invocation="benchmarks/compare_layouts.sh${*:+ $*} (at $(git rev-parse --short HEAD 2>/dev/null ||
  echo '?'))"
OUT=${1:-build/bench-results/layouts}
OUT=${OUT%/}
shift || true
PARTS=${*:-bubble tp memory cluster}
mkdir -p "$OUT"
abs_out=$(cd "$OUT" && pwd)  # strata-cluster runs the ranks elsewhere: an absolute path
export OPENBLAS_NUM_THREADS=1 STRATA_TIMEOUT=${STRATA_TIMEOUT:-300}
gpt=build/bin/strata-gpt
common=(--config small --warmup 1 --eval-every 0 --sample 0 --quiet)
run() { build/bin/strata-run -n "$1" --timeout 900 "${@:2}"; }
# median over steps 1.. (step 0 sets up) of a --json figure: seconds, or stage k's bubble
median() {
  python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); what = sys.argv[2]
v = sorted(s['seconds'] if what == 'seconds' else s['stages'][int(what)]['bubble']
           for s in d['steps'][1:])
print(f"{v[len(v) // 2]:.4f}")
PY
}

for part in $PARTS; do case $part in
bubble)
  echo "# bubble: median over 12 steps per stage, against (p-1)/(m+p-1) or (p-1)/(v m+p-1)"
  for p in 2 4; do
    layers=8
    for sched in gpipe 1f1b interleaved; do
      for m in 4 8; do
        v=1; [ "$sched" = interleaved ] && v=2
        f="$OUT/bubble_p${p}_${sched}_m$m.json"
        run "$p" $gpt train "${common[@]}" --layers $layers --pp "$p" --schedule $sched \
          --virtual-stages $v --micro-batches "$m" --batch $((4 * m)) --steps 13 --json "$f" >/dev/null
        ideal=$(python3 -c "print(f'{($p-1)/($v*$m+$p-1):.4f}')")
        line="p=$p $sched m=$m v=$v ideal $ideal stages"
        sum=0
        for ((s = 0; s < p; ++s)); do b=$(median "$f" $s); line+=" $b"; sum=$(python3 -c "print($sum + $b)"); done
        mean=$(python3 -c "print(f'{$sum / $p:.4f}')")
        echo "$line pipeline $mean ($(python3 -c "print(f'{$mean / $ideal:.2f}')")x ideal)" |
          tee -a "$OUT/bubble.txt"
      done
    done
  done ;;
tp)
  echo "# tp: small, global batch 32, median of 8 steps; 3 rounds"
  for r in 1 2 3; do
    $gpt train "${common[@]}" --steps 9 --json "$OUT/tp_one.json" >/dev/null
    run 2 $gpt train "${common[@]}" --tp 2 --steps 9 --json "$OUT/tp_two.json" >/dev/null
    one=$(median "$OUT/tp_one.json" seconds) two=$(median "$OUT/tp_two.json" seconds)
    echo "round $r: 1 rank $one s, tp2 $two s, ratio $(python3 -c "print(f'{$two / $one:.3f}')")" |
      tee -a "$OUT/tp.txt"
  done ;;
memory)
  echo "# memory: 8 ranks, small, tp2 x pp2 x dp2 (1F1B, 4 micro-batches), one step per ZeRO stage"
  for z in 0 1 2 3; do
    echo "## ZeRO stage $z" | tee -a "$OUT/memory.txt"
    run 8 $gpt train "${common[@]}" --tp 2 --pp 2 --micro-batches 4 --stage $z --steps 1 |
      grep '^memory' | tee -a "$OUT/memory.txt"
  done ;;
cluster)
  echo "# cluster: 2 nodes x 4 ranks, 1 Gbit/s, small with 8 heads as tp4 x pp2, median of 8 steps"
  for placement in in across; do
    extra=(); [ $placement = across ] && extra=(--mpirun-arg=--map-by --mpirun-arg=node)
    tools/strata-cluster --nodes 2 --ranks-per-node 4 --rate 1gbit --timeout 600 -q "${extra[@]}" -- \
      $gpt train "${common[@]}" --heads 8 --tp 4 --pp 2 --micro-batches 4 --batch 16 --steps 9 \
      --allow-cross-node-tp --json "$abs_out/cluster_$placement.json" >/dev/null 2>&1
  done
  a=$(median "$OUT/cluster_in.json" seconds) b=$(median "$OUT/cluster_across.json" seconds)
  echo "tp in node $a s/step, tp across nodes $b s/step, speed-up $(python3 -c "print(f'{$b / $a:.2f}')")" |
    tee -a "$OUT/cluster.txt" ;;
*) echo "unknown part $part" >&2; exit 2 ;;
esac; done
benchmarks/pack_results.py "$OUT" "$OUT.json" --section "3D trainer (compare_layouts.sh)" \
  --command "$invocation"
echo "packed: $OUT.json"
