#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer (CMake preset `asan`,
# build in build-asan/): any UB report or memory error fails its test. scripts/test.sh runs a
# subset of it (test preset `asan-ci`). Leaks are not checked (UCX and Open
# MPI keep process-lifetime allocations). Left out: the emulated-cluster tests (namespaces, slow
# under ASan) and install_consumer (a downstream build without the sanitizer cannot load an
# instrumented library).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset asan > build-asan.log 2>&1 || { cat build-asan.log; exit 1; }
cmake --build build-asan -j"$(nproc)" >> build-asan.log 2>&1 || { tail -50 build-asan.log; exit 1; }
cd build-asan
export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ctest --output-on-failure --timeout 600 -E "^cluster_|^install_consumer$" "$@"
