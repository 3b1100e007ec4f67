#!/usr/bin/env bash
# Installs the Debian packages Strata needs, then configures and builds into build/.
# Arguments go to CMake's configure step (scripts/test.sh: -DSTRATA_PYTHON=ON ...).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" > build.log 2>&1 || { cat build.log; exit 1; }
cmake --build build -j"$(nproc)" >> build.log 2>&1 || { tail -50 build.log; exit 1; }
echo "build: ok (log in build.log)"
