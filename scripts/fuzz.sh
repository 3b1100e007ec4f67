#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, with clang) and runs each for SECONDS (default 60): first
# over every saved regression input (fuzz/regressions/<target>/), then fuzzing from the seed
# corpus. A crash fails the script and leaves the input in build-fuzz/crashes/<target>/: add it to
# fuzz/regressions/<target>/ with the fix. Called by CTest (fuzz_targets).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
command -v clang++ > /dev/null || { echo "fuzz: clang++ not found (scripts/install-deps.sh installs it)"; exit 1; }
cmake -S fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo > build-fuzz.log 2>&1 ||
  { cat build-fuzz.log; exit 1; }
cmake --build build-fuzz -j"$(nproc)" >> build-fuzz.log 2>&1 || { tail -40 build-fuzz.log; exit 1; }

declare -A seeds=(
  [store_frame]="fuzz/corpus/store_frame"
  [topology]="fuzz/corpus/topology tests/data/topologies/nccl"
)
status=0
for target in store_frame topology; do
  bin="build-fuzz/${target}_fuzz"
  crashes="build-fuzz/crashes/$target"
  work="build-fuzz/corpus/$target"  # what this run learns; the committed seeds stay untouched
  mkdir -p "$crashes" "$work"
  if compgen -G "fuzz/regressions/$target/*" > /dev/null; then
    "$bin" fuzz/regressions/"$target"/* > "build-fuzz/$target-regressions.log" 2>&1 ||
      { echo "fuzz: $target fails a saved regression input"; tail -30 "build-fuzz/$target-regressions.log"; status=1; }
  fi
  # shellcheck disable=SC2086
  if "$bin" "$work" ${seeds[$target]} -max_total_time="$seconds" -max_len=16384 -timeout=10 \
       -rss_limit_mb=2048 -artifact_prefix="$crashes/" -print_final_stats=1 \
       > "build-fuzz/$target.log" 2>&1; then
    echo "fuzz: $target ok: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "build-fuzz/$target.log" | grep -o '[0-9]*$') inputs in ${seconds} s"
  else
    echo "fuzz: $target FAILED; input saved in $crashes"
    tail -40 "build-fuzz/$target.log"
    status=1
  fi
done
exit $status
