#!/usr/bin/env bash
# A launch gone wrong is named as such (issue 22): NP processes under mpirun, each given the
# torchrun-style environment the snippet SETUP makes from its index $i (RANK, WORLD_SIZE, ...),
# run strata-perf; the job must fail, and its output must hold EXPECTED (a grep -E pattern).
#   launch_mistake.sh STRATA_PERF PORT NP SETUP EXPECTED
set -uo pipefail
perf=$1 port=$2 np=$3 setup=$4 expected=$5
out=$(timeout 90 mpirun --allow-run-as-root --oversubscribe --bind-to none -x STRATA_TIMEOUT=30 \
  -np "$np" sh -c "i=\$OMPI_COMM_WORLD_RANK; $setup
    STRATA_IGNORE_MPI=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port exec \"\$0\" all_reduce -b 8 -e 8" \
  "$perf" 2>&1)
status=$?
grep -E "^strata-perf:" <<< "$out"
if [ $status -eq 0 ]; then echo "FAIL: the job succeeded"; exit 1; fi
if [ $status -eq 124 ]; then echo "FAIL: the job hung (killed after 90 s)"; exit 1; fi
if ! grep -qE "$expected" <<< "$out"; then echo "$out" | tail -20; echo "FAIL: no '$expected'"; exit 1; fi
echo "PASS"
