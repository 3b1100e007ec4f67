#!/usr/bin/env bash
# The device path's checks on a GPU machine (docs/device.md): the gpu tests on 1 rank (NCCL) and
# 2 and 4 ranks sharing the GPU (staged), the C ABI's on 1 and 2, then strata-perf --device cuda
# against raw NCCL on one rank and the staged path against the host path on two.
# Usage: benchmarks/gpu_check.sh BIN_DIR OUT_DIR   (BIN_DIR holds strata-run, strata-perf,
# strata_device_tests and c_abi_gpu_test; OUT_DIR gets one log per step)
set -u
bin=$1 out=$2
mkdir -p "$out"
export STRATA_TIMEOUT=60
nvidia-smi -L | tee "$out/device.txt"
for np in 1 2 4; do
  timeout 200 "$bin/strata-run" -n $np --timeout 190 "$bin/strata_device_tests" \
    >"$out/tests_np$np.log" 2>&1
  echo "tests np$np: exit $? $(grep -cE '^\[       OK' "$out/tests_np$np.log") ok," \
    "$(grep -E '^\[  FAILED  \].*\(' "$out/tests_np$np.log" | wc -l) failed"
done
for np in 1 2; do  # the C ABI on CUDA memory, where it was built
  [ -x "$bin/c_abi_gpu_test" ] || break
  timeout 100 "$bin/strata-run" -n $np --timeout 90 "$bin/c_abi_gpu_test" >"$out/c_abi_np$np.log" 2>&1
  echo "c abi np$np: exit $?"
done
perf() {  # LOG NP ARGS...: strata-perf's table, checked element by element
  local log=$1 np=$2
  shift 2
  timeout 200 "$bin/strata-run" -n "$np" --timeout 190 "$bin/strata-perf" "$@" >"$out/$log" 2>&1
  echo "perf $log: exit $?"
}
perf nccl_8B.log 1 all_reduce -b 8 -e 8 -n 2000 -w 200 --device cuda --compare nccl
for coll in all_reduce all_gather reduce_scatter broadcast reduce; do
  perf "nccl_$coll.log" 1 $coll -b 8 -e 256M -f 8 -n 50 -w 10 --device cuda --compare nccl
done
# all_to_all: raw NCCL's self send and receive beside Strata's copy, then Strata alone to 256M.
perf nccl_all_to_all.log 1 all_to_all -b 8 -e 16M -f 8 -n 50 -w 10 --device cuda --compare nccl
perf all_to_all_big.log 1 all_to_all -b 128M -e 256M -n 20 -w 5 --device cuda
perf staged_np2.log 2 all_reduce -b 1M -e 256M -f 4 -n 10 -w 3 --device cuda
perf host_np2.log 2 all_reduce -b 1M -e 256M -f 4 -n 10 -w 3
