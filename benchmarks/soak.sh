#!/usr/bin/env bash
# The soak's long form (tests/mp/soak_test.cpp; CTest runs 30 s of each path): random
# collectives of every kind, dtype and reduction from two threads on their own communicators,
# every element checked, for SECONDS (default 300) on shared memory and then on the network
# (STRATA_SHM=0), with NP ranks (default 4). Prints each rank's calls and elements checked; exits
# non-zero on the first wrong element or error.
#   benchmarks/soak.sh [BUILD_DIR] [SECONDS] [NP]
set -euo pipefail
build=${1:-build} seconds=${2:-300} np=${3:-4}
for shm in 1 0; do
  echo "== STRATA_SHM=$shm, $np ranks, $seconds s"
  mpirun --allow-run-as-root --oversubscribe --bind-to none -x STRATA_SOAK_SECONDS="$seconds" \
    -x STRATA_SHM="$shm" -np "$np" "$build/bin/strata_mp_tests" \
    --gtest_also_run_disabled_tests --gtest_filter='Soak.*' | grep -E 'soak rank|OK|FAILED'
done
