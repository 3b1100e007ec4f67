#!/usr/bin/env bash
# strata-gpt on an emulated cluster of 2 nodes x 4 ranks (tools/strata-cluster, 1 Gbit/s between
# the nodes). Usage: cluster_gpt_test.sh STRATA_CLUSTER STRATA_GPT WORKDIR
#  1. validate tp4.pp2 (tp inside each node, pp across) passes, and its report shows the link
#     between the nodes (class NET);
#  2. with ranks placed round-robin over the nodes, the same layout's tp groups span nodes: refused
#     with one line naming the group and its nodes, exit 2, nothing run.
# Exits 77 (skipped) where strata-cluster cannot make namespaces.
set -uo pipefail
cluster=$1 gpt=$2 dir=$3
model=(--config tiny --layers 4 --heads 4 --batch 16 --steps 10)
rm -rf "$dir" && mkdir -p "$dir"

"$cluster" --nodes 2 --ranks-per-node 4 --rate 1gbit --timeout 240 -q -- \
  "$gpt" validate "${model[@]}" --layouts tp4.pp2 --report "$dir/report" > "$dir/validate.log" 2>&1
rc=$?
[ "$rc" = 77 ] && { cat "$dir/validate.log"; exit 77; }
cat "$dir/validate.log"
[ "$rc" = 0 ] || { echo "FAIL: validate tp4.pp2 exited $rc"; exit 1; }
grep -q '^| NET |' "$dir/report/README.md" || { echo "FAIL: the report shows no NET link"; exit 1; }
grep -q '^| node1 | {4, 5, 6, 7} |' "$dir/report/README.md" ||
  { echo "FAIL: the report's inventory lacks node1's ranks"; exit 1; }

# Longer than the test's STRATA_TIMEOUT (120 s): a rank stuck in a wait ends with Strata's
# error naming the operation, not with the launcher's kill.
"$cluster" --nodes 2 --ranks-per-node 4 --timeout 180 -q --mpirun-arg=--map-by --mpirun-arg=node -- \
  "$gpt" train "${model[@]}" --tp 4 --pp 2 > "$dir/cross.log" 2>&1
rc=$?
cat "$dir/cross.log"
want="TP group of world ranks 0,1,2,3 spans nodes node0 (ranks 0,2) and node1 (ranks 1,3)"
[ "$rc" = 2 ] || { echo "FAIL: tp across nodes exited $rc, not 2"; exit 1; }
[ "$(grep -c '^strata-gpt: ' "$dir/cross.log")" = 1 ] || { echo "FAIL: not one line"; exit 1; }
grep -qF "$want" "$dir/cross.log" || { echo "FAIL: the refusal does not name the group"; exit 1; }
grep -q '^step' "$dir/cross.log" && { echo "FAIL: it trained"; exit 1; }
echo "ok: tp4.pp2 validated across 2 nodes; tp across nodes refused"
