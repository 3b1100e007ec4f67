#!/usr/bin/env bash
# Installs, builds, and runs the whole test suite through CTest (every test has a timeout).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd build
ctest --output-on-failure --timeout 900 "$@"
