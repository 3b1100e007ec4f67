#!/usr/bin/env bash
# Installs (Debian packages; a venv with the pinned torch, scripts/python-env.sh), builds (C++,
# the C ABI, the Python module, the torch backend), and runs the whole test suite through CTest
# (every test has a timeout), then the engine and communicator tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer and under ThreadSanitizer (CMakePresets.json:
# asan-ci, tsan-ci; each builds just those tests, in build-asan/ and build-tsan/). Arguments go
# to the first ctest; STRATA_SANITIZERS=0 skips the sanitizer runs (about 7 minutes). Where CUDA
# is installed, the library is also built and its device checks run without the device path.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
venv=$(scripts/python-env.sh)   # the pinned torch, nanobind, pytest
scripts/build.sh -DSTRATA_PYTHON=ON -DPython_EXECUTABLE="$venv/bin/python"
(cd build && ctest --output-on-failure --timeout 900 "$@")
# Where the main build took the device path (CUDA and NCCL found), the build without it too
# (docs/device.md): the library, strata-perf and the device checks, which must then refuse
# device memory by name.
if grep -q "^STRATA_NCCL_LIBRARY:FILEPATH=/" build/CMakeCache.txt; then
  cmake -S . -B build-nocuda -DSTRATA_WITH_CUDA=OFF > build-nocuda.log 2>&1 &&
    cmake --build build-nocuda -j"$(nproc)" --target strata strata-perf strata-run \
      strata_device_tests >> build-nocuda.log 2>&1 || { tail -50 build-nocuda.log; exit 1; }
  (cd build-nocuda && ctest --output-on-failure -R '^device_np[12]$')
fi
[ "${STRATA_SANITIZERS:-1}" = 0 ] && exit 0
for s in asan tsan; do
  cmake --preset "$s" > "build-$s.log" 2>&1 || { cat "build-$s.log"; exit 1; }
  cmake --build --preset "$s-ci" -j"$(nproc)" >> "build-$s.log" 2>&1 || { tail -50 "build-$s.log"; exit 1; }
  echo "== $s: $(ctest --preset "$s-ci" -N | tail -1)"
  ctest --preset "$s-ci"
done
