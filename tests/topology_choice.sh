#!/usr/bin/env bash
# The algorithm choice follows the links of the machine a topology file describes
# (STRATA_TOPO_FILE): 4 ranks as 2 emulated nodes of 2 run a 256 KiB all-to-all, checked
# (strata-perf -c 1), and the world group must have chosen EXPECTED (STRATA_DEBUG=INFO's log).
#   topology_choice.sh MPIRUN... -- STRATA_PERF TOPO_FILE EXPECTED
set -uo pipefail
mpirun=()
while [ "$1" != "--" ]; do mpirun+=("$1"); shift; done
shift
perf=$1 topo=$2 expected=$3
log=$("${mpirun[@]}" -x STRATA_DEBUG=INFO -x STRATA_TOPO_FILE="$topo" -np 4 \
  sh -c 'STRATA_NODE_ID=emu$((OMPI_COMM_WORLD_RANK / 2)) exec "$0" "$@"' \
  "$perf" all_to_all -b 256K -e 256K -n 1 -w 0 -c 1 2>&1)
status=$?
links=$(grep -m1 -o 'group world: .*links .*' <<< "$log")
chose=$(grep -m1 -o 'group world (4 ranks): all_to_all ~2^18 B: [a-z_]*' <<< "$log")
echo "$links"
echo "$chose"
if [ $status -ne 0 ]; then echo "$log" | tail -30; echo "FAIL: strata-perf exited $status"; exit 1; fi
if [ "${chose##* }" != "$expected" ]; then echo "FAIL: chose '${chose##* }', expected $expected"; exit 1; fi
echo "PASS: $(basename "$topo"): $expected"
