#!/usr/bin/env bash
# validate's bandwidth verdict, without timing anything: the numerics tests pass --bw-threshold 0
# (a loaded machine's bandwidth says nothing about numbers), so this checks the verdict itself.
# The same 2-rank dp2 run passes at threshold 0 and fails at 1000 (no link moves 1000x its
# promise); the numbers are the same in both runs, so only the bandwidth can have failed it.
# A row: layout, loss and gradient-norm differences, result, replicas identical, ...
# Usage: bw_threshold_test.sh STRATA_RUN STRATA_GPT
set -uo pipefail
run=$1 gpt=$2 failed=0
validate() {  # threshold, expected exit code, expected row and last line
  local out rc
  out=$("$run" -n 2 "$gpt" validate --config tiny --steps 2 --batch 8 --layouts dp2 \
        --bw-threshold "$1" 2>&1)
  rc=$?
  if [ "$rc" != "$2" ] || ! grep -qE "^dp2 +[0-9.e+-]+ +[0-9.e+-]+ +$3 +yes " <<< "$out" ||
     ! grep -qxF "# validate: $4" <<< "$out"; then
    echo "FAIL: --bw-threshold $1 -> exit $rc (want $2, row '$3', '$4'):"
    echo "$out"
    failed=1
  else
    echo "ok: --bw-threshold $1 -> exit $rc, dp2 $3"
  fi
}
validate 0 0 pass "every layout matches the reference"
validate 1000 1 FAIL "FAILED"
exit $failed
