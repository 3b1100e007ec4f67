#!/usr/bin/env bash
# DiLoCo over an emulated wide-area link (issue 38): 2 sites of one node and 2 ranks each, joined
# by a shaped link; strata-gpt trains `small` as 2 islands (one per site), as synchronous data
# parallelism over the same 4 ranks and link, and as the same islands with the link unshaped.
# Prints per run: tokens per second (median step after the first), the validation loss at the
# end, and the bytes that crossed the link per training token (strata-cluster's uplink counters).
#
#   benchmarks/diloco_sites.sh [WAN_RATE] [STEPS] [H] [WAN_DELAY]   (default 100mbit 200 50,
#                                                                    no delay; 25ms per uplink
#                                                                    is 50 ms one way)
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${1:-100mbit}
STEPS=${2:-200}
H=${3:-50}
DELAY=${4:-}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# run NAME WAN_RATE(or -) STRATA-GPT-ARGS...
run() {
  local name=$1 rate=$2
  shift 2
  local wan=()
  [ "$rate" != - ] && wan=(--wan-rate "$rate" ${DELAY:+--wan-delay "$DELAY"})
  tools/strata-cluster --nodes 2 --sites 2 --ranks-per-node 2 "${wan[@]}" --timeout 3000 -- \
    build/bin/strata-gpt train --config small --steps "$STEPS" --eval-every "$STEPS" \
    --eval-batches 8 --sample 0 --quiet --json "$OUT/$name.json" "$@" >"$OUT/$name.out" \
    2>"$OUT/$name.err" || { cat "$OUT/$name.err" >&2; exit 1; }
  python3 - "$name" "$OUT/$name.json" "$OUT/$name.err" <<'EOF'
import json, re, statistics, sys
name, path, err = sys.argv[1:]
j = json.load(open(path))
secs = [s["seconds"] for s in j["steps"][1:]]
tokens = j["global_batch"] * j["config"]["ctx"]
wan = sum(int(b) for b in re.findall(r"site \d+ sent (\d+) B", open(err).read()))
print(f"{name:<34} {tokens / statistics.median(secs):9.0f} tok/s  val {j['val'][-1]['loss']:.4f}"
      f"  {wan / (tokens * len(j['steps'])):10.1f} wide-area B/token  ({wan} B)")
EOF
}

echo "2 sites x 2 ranks, wide-area link $RATE${DELAY:+ + $DELAY per uplink}, small, $STEPS steps, batch 32 (commit $(git rev-parse --short HEAD))"
run "dp4 (synchronous)" "$RATE"
run "islands2 H$H" "$RATE" --islands 2 --outer-every "$H"
run "islands2 H$H, link unshaped" - --islands 2 --outer-every "$H"
run "islands2 H$H streaming 4, int8" "$RATE" --islands 2 --outer-every "$H" --outer-streaming 4 \
  --outer-dtype int8
