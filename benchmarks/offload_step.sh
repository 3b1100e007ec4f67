#!/usr/bin/env bash
# Optimizer-state offload (issue 38): strata-gpt trains `small` at ZeRO-STAGE (default 1) on 2
# ranks with the AdamW moments in memory and offloaded to a file on local disk (a window of
# WINDOW MiB; at stage 3 with the parameter shard too, --offload-params), alternating, twice each. Prints per run: the median step (after the first two), the step ratio
# against the in-memory run beside it, each rank's peak resident memory (VmHWM), and the
# optimizer bytes resident and on disk. The losses of every run must be identical (checked).
#
#   benchmarks/offload_step.sh [DIR] [WINDOW_MIB] [STEPS] [STAGE]   (default a fresh dir under
#                                                                    build/, 1, 30, 1)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-$(mktemp -d -p build offload.XXXXXX)}
WINDOW=${2:-1}
STEPS=${3:-30}
STAGE=${4:-1}
PARAMS=()
[ "$STAGE" = 3 ] && PARAMS=(--offload-params)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# run NAME STRATA-GPT-ARGS...: prints "median_seconds" and keeps the losses in $OUT/NAME.loss
run() {
  local name=$1
  shift
  timeout 900 mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to core \
    /usr/bin/time -f "peak resident %M KiB" build/bin/strata-gpt train --config small \
    --stage "$STAGE" --steps "$STEPS" --eval-every 0 --sample 0 --quiet --json "$OUT/$name.json" "$@" \
    >"$OUT/$name.out" 2>"$OUT/$name.err" || { cat "$OUT/$name.err" >&2; exit 1; }
  python3 - "$OUT/$name.json" "$OUT/$name.err" "$OUT/$name.loss" <<'PY'
import json, re, statistics, sys
j = json.load(open(sys.argv[1]))
open(sys.argv[3], "w").write(" ".join(repr(s["loss"]) for s in j["steps"]))
rss = re.findall(r"peak resident (\d+) KiB", open(sys.argv[2]).read())
m = j["memory"]
print(f'{statistics.median(s["seconds"] for s in j["steps"][2:]):.4f} '
      f'{"/".join(str(int(r) >> 10) for r in rss)} {m["optimizer_bytes"]} {m["offloaded_optimizer_bytes"]}')
PY
}

echo "small, ZeRO-$STAGE ${PARAMS[*]}, 2 ranks, $STEPS steps, window $WINDOW MiB in $DIR (commit $(git rev-parse --short HEAD))"
printf "%-22s %9s %7s %16s %14s %14s\n" run "step ms" ratio "peak RSS MiB" "optim. resident" "on disk"
for rep in 1 2; do
  read -r mem_s mem_rss mem_opt mem_off < <(run "memory$rep")
  read -r off_s off_rss off_opt off_off < <(run "offload$rep" --offload-optimizer "disk:$DIR" \
    --offload-window "$WINDOW" "${PARAMS[@]}")
  cmp -s "$OUT/memory$rep.loss" "$OUT/offload$rep.loss" || { echo "losses differ" >&2; exit 1; }
  awk -v r="$rep" -v ms="$mem_s" -v mr="$mem_rss" -v mo="$mem_opt" -v md="$mem_off" \
    -v os="$off_s" -v or="$off_rss" -v oo="$off_opt" -v od="$off_off" 'BEGIN {
      printf "%-22s %9.1f %7.2f %16s %14s %14s\n", "in memory (" r ")", ms * 1000, 1, mr, mo, md
      printf "%-22s %9.1f %7.2f %16s %14s %14s\n", "offloaded (" r ")", os * 1000, os / ms, or, oo, od
    }'
done
echo "losses of every run identical"
