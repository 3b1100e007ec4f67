#!/usr/bin/env bash
# strata-store, the job's store outside the job (issue 38): refuses a missing token and a bad
# port by name; under strata-run --keep-going the ranks are told the store is outside
# (STRATA_STORE_OUTSIDE=1), a job bootstraps through it and runs, and no strata-store outlives
# the launcher. That the job outlives rank 0 is gpt_island_loss's check (rank 0 killed).
# Usage: strata_store_test.sh STRATA_RUN STRATA_STORE STRATA_PERF
set -uo pipefail
run=$1 store=$2 perf=$3
fail() { echo "FAIL: $*"; exit 1; }

out=$(env -u STRATA_JOB_TOKEN "$store" 2>&1); s=$?
[ $s = 2 ] && grep -q "STRATA_JOB_TOKEN is not set" <<< "$out" || fail "no token: status $s, '$out'"
out=$(STRATA_JOB_TOKEN=t "$store" --port 70000 2>&1); s=$?
[ $s = 2 ] && grep -q -- "--port 70000: expected a port" <<< "$out" || fail "bad port: status $s, '$out'"

out=$("$run" -n 2 --keep-going --timeout 60 sh -c 'echo "rank $RANK outside=$STRATA_STORE_OUTSIDE"' 2>&1)
[ "$(grep -c 'outside=1' <<< "$out")" = 2 ] || fail "ranks not told the store is outside: '$out'"

# A real job over the outside store: strata-perf's ranks bootstrap through it and run.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
STRATA_STORE_PORT=$port STRATA_TIMEOUT=30 "$run" -n 2 --keep-going --timeout 60 \
  "$perf" all_reduce -b 8 -e 8 -n 5 > /dev/null || fail "strata-perf over the outside store failed"
for d in /proc/[0-9]*; do
  tr '\0' ' ' < "$d/cmdline" 2>/dev/null | grep -q "strata-store --addr 127.0.0.1 --port $port" &&
    fail "strata-store on port $port outlived strata-run"
done
echo "ok"
