#!/usr/bin/env bash
# A job's store under a connection flood (issue 22): while strata-store-flood holds N
# unauthenticated connections to it (garbage on every tenth, each refused one re-opened at once),
# the four ranks of a job bootstrap and run collectives. The job must succeed, and rank 0's log
# (where the store runs) must hold at most one "refused connection" line per cause.
#   store_flood.sh STRATA_PERF STRATA_STORE_FLOOD PORT N
set -uo pipefail
perf=$1 flood=$2 port=$3 n=$4
dir=$(mktemp -d)
trap 'kill $flood_pid 2>/dev/null; kill ${pids[*]} 2>/dev/null; rm -rf "$dir"' EXIT
export WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port STRATA_JOB_TOKEN=flood STRATA_TIMEOUT=60
rank() {  # rank $1, its output in $dir/rank$1.log
  RANK=$1 LOCAL_RANK=$1 LOCAL_WORLD_SIZE=4 timeout 120 "$perf" all_reduce -b 8 -e 64K -n 5 \
    >"$dir/rank$1.log" 2>&1 &
  pids[$1]=$!
}
"$flood" "$port" "$n" >"$dir/flood.log" 2>&1 &
flood_pid=$!
rank 0  # the store's server: the flood connects once it listens
for _ in $(seq 300); do grep -q "^holding" "$dir/flood.log" && break; sleep 0.1; done
if ! grep -q "^holding" "$dir/flood.log"; then echo "FAIL: the flood never held $n connections"; exit 1; fi
echo "flood holds $n connections; starting ranks 1-3"
for r in 1 2 3; do rank $r; done
status=0
for r in 0 1 2 3; do
  wait "${pids[$r]}" || { echo "FAIL: rank $r exited with $?"; status=1; }
done
echo "the flood opened $(grep ^opened "$dir/flood.log" | tail -1 | cut -d' ' -f2) connections"
cat "$dir/rank0.log" | grep -E "STORE|all_reduce|^ +[0-9]" | head -40
if [ $status -ne 0 ]; then tail -n 20 "$dir"/rank*.log; exit 1; fi
refused=$(grep "refused connection from" "$dir/rank0.log")
if [ -z "$refused" ]; then echo "FAIL: no refusal logged: did the flood reach the store?"; exit 1; fi
dups=$(sed -n 's/.*\[\([^;]*\);.*/\1/p' <<< "$refused" | sort | uniq -d)
if [ -n "$dups" ]; then echo "FAIL: causes logged more than once: $dups"; exit 1; fi
echo "PASS"
