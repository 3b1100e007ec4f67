#!/usr/bin/env bash
# Losing an island (issue 38): strata-gpt trains tiny as 3 islands of 2 ranks (DiLoCo, H 2)
# under strata-run --keep-going, and rank 4 (island 2) is killed with SIGKILL at step 100 of 300.
# Checks: each of the 4 ranks of islands 0 and 1 logs island 2 (job ranks 4-5) lost within 2 s
# of the kill; they train on, without a restart, to the last step and its validation; their loss
# keeps falling (the mean of the last 20 steps below that of the 20 before the kill); ranks 4
# and 5 are the only ones to fail. Usage: island_loss_test.sh STRATA_RUN STRATA_GPT
set -uo pipefail
run=$1 gpt=$2
out=$(mktemp) err=$(mktemp)
job=""
trap 'rm -f "$out" "$err"; [ -n "$job" ] && kill "$job" 2>/dev/null' EXIT
fail() {
  echo "FAIL: $*"
  echo "--- stdout (end)"; tail -5 "$out"
  echo "--- stderr"; cat "$err"
  exit 1
}
"$run" -n 6 --keep-going --timeout 240 "$gpt" train --config tiny --islands 3 --outer-every 2 \
  --batch 24 --steps 300 --eval-every 300 --sample 0 > "$out" 2> "$err" &
job=$!
for _ in $(seq 3000); do grep -q '^step   100/' "$out" && break; sleep 0.01; done
grep -q '^step   100/' "$out" || fail "step 100 never came"
victim=""
for d in /proc/[0-9]*; do  # strata-run's children, found without procps
  [ "$(awk '{print $4}' "$d/stat" 2>/dev/null)" = "$job" ] || continue
  tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qx 'RANK=4' && victim=${d#/proc/}
done
[ -n "$victim" ] || fail "rank 4 is not among strata-run's children"
kill -9 "$victim"
t0=$(date +%s%N)
killed_at=$(grep -c '^step ' "$out")
want='island 2 (job ranks 4-5) lost'
while [ "$(grep -c "$want" "$err")" -lt 4 ]; do
  [ $(( $(date +%s%N) - t0 )) -gt 10000000000 ] && fail "fewer than 4 survivors logged '$want' in 10 s"
  sleep 0.01
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "every survivor logged the lost island $ms ms after the kill (at step $killed_at)"
[ "$ms" -le 2000 ] || fail "the lost island was logged after $ms ms (bound 2000)"
wait "$job"
job=""
grep -q '^step   300/300' "$out" || fail "the survivors did not reach step 300"
grep -q '^step   300  val loss' "$out" || fail "no validation after the loss"
failed=$(grep -o 'rank [0-9]* (pid [0-9]*) exited with status' "$err" | awk '{print $2}' | sort | tr '\n' ' ')
[ "$failed" = "4 5 " ] || fail "failed ranks: '$failed' (expected 4 and 5)"
awk -v k="$killed_at" '/^step +[0-9]+\/300  loss/ {
    split($2, s, "/"); n = s[1] + 0; l[n] = $4 }
  END {
    for (i = k - 19; i <= k; ++i) before += l[i] / 20
    for (i = 281; i <= 300; ++i) after += l[i] / 20
    printf "mean loss of steps %d-%d: %.4f; of steps 281-300: %.4f\n", k - 19, k, before, after
    exit !(after < before) }' "$out" || fail "the loss did not keep falling"
echo "ok"
