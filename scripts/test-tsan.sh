#!/usr/bin/env bash
# ThreadSanitizer run of the progress-engine and communicator tests (issue 7), wider than the
# `tsan-ci` test preset that scripts/test.sh runs: that preset (flight recorder, store, the mp
# suite on 2 ranks and under STRATA_CHECK=1), then the mp suite on 3 ranks and under the strata-run
# launcher, any TSan report fatal. About 6 minutes with the build done.
#
# What the run needs (set in CMakePresets.json, exported again here for the direct runs), and why:
# - UCX's memory hooks off (UCX_MEM_*): libucm intercepts madvise(), which glibc calls from an
#   exiting thread after TSan has dropped that thread's state: SIGSEGV in ucm_event_enter.
# - PointToPoint.MessageLargerThan2GiB is left out: with TSan's shadow memory each rank needs
#   ~12 GB, more than this 24 GB machine has for two ranks.
# - OpQueue.*UsesNoCpu are left out: they bound the process's CPU time over a second, which
#   TSan's own background thread inflates (0.26 s seen). The main suite runs them uninstrumented.
# (TSan does not model timed mutex locks; the engine uses none, see docs/architecture.md.)
set -euo pipefail
cd "$(dirname "$0")/.."

timeout 600 cmake --preset tsan > /dev/null
timeout 3000 cmake --build build-tsan -j"$(nproc)" \
  --target store_test flight_recorder_test strata_mp_tests strata-run > /dev/null
timeout 900 ctest --preset tsan-ci

export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp ${TSAN_OPTIONS:-}"
export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no
export GTEST_FILTER=-PointToPoint.MessageLargerThan2GiB:OpQueue.*UsesNoCpu
bin=build-tsan/bin
run() { echo "== $*"; "$@"; }
run timeout 600 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 3 \
  "$bin/strata_mp_tests" --gtest_filter="$GTEST_FILTER:CollectivesLarge.F32Sum64Mi"
run timeout 300 "$bin/strata-run" -n 2 --timeout 280 "$bin/strata_mp_tests" \
  --gtest_filter="Collectives*.*$GTEST_FILTER"
echo "tsan: all clean"
