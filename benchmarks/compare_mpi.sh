#!/usr/bin/env bash
# Produces the tables behind benchmarks/RESULTS.md: strata-perf with --compare mpi for each
# collective, world size and Open MPI configuration (Debian's Open MPI disables its UCX path by
# default, so its three plausible "best" configurations are all measured).
# Usage: benchmarks/compare_mpi.sh [outdir [small|quick]]   (after scripts/build.sh; `small`:
# only the small all-reduce sweep, the latency_*.txt files; `quick`: the regression guard, 64 KiB
# to 16 MiB, the vader and ucx configurations, 20 iterations, then the worst ratio per collective
# (benchmarks/summarize_results.py --quick); about 30 s here)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-benchmarks/results}
mode=${2:-}
only_small=""
[[ $mode == small ]] && only_small=1
mkdir -p "$out"
# Every rank bound to a core, two to a core at n = 4, for both libraries: unbound, the scheduler
# now and then puts three ranks on one core for a while, and a run's small-message figures swing
# 3x with it (RESULTS.md, "Binding").
bind="--bind-to core:overload-allowed --map-by core"
declare -A mpi_cfg=(
  [default]=""
  [vader]="--mca pml ob1 --mca btl self,vader"
  [ucx]="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any"
)
if [[ $mode == quick ]]; then
  for np in 2 4; do
    for coll in all_reduce reduce_scatter all_gather all_to_all; do
      for cfg in vader ucx; do
        f="$out/${coll}_np${np}_${cfg}.txt"
        # shellcheck disable=SC2086
        mpirun --allow-run-as-root --oversubscribe $bind -np "$np" ${mpi_cfg[$cfg]} \
          build/bin/strata-perf "$coll" -b 64K -e 16M -f 4 -n 20 -w 5 --compare mpi \
          --json "${f%.txt}.json" > "$f" 2>&1 || echo "failed: $f"
      done
    done
  done
  exec benchmarks/summarize_results.py --quick "$out"
fi
for np in 2 4; do
  for coll in all_reduce reduce_scatter all_gather all_to_all; do
    [[ -n $only_small ]] && break
    for cfg in default vader ucx; do
      f="$out/${coll}_np${np}_${cfg}.txt"
      echo "== $f"
      # shellcheck disable=SC2086
      mpirun --allow-run-as-root --oversubscribe $bind -np "$np" ${mpi_cfg[$cfg]} \
        build/bin/strata-perf "$coll" -b 64K -e 256M -f 4 -n 5 -w 5 --compare mpi \
        --json "${f%.txt}.json" --plot "${f%.txt}.svg" > "$f" 2>&1 || echo "failed: $f"
    done
  done
  # Small all-reduces, 8 bytes to 32 KiB: latency, many iterations, blocking.
  for cfg in default vader ucx; do
    f="$out/latency_np${np}_${cfg}.txt"
    echo "== $f"
    # shellcheck disable=SC2086
    mpirun --allow-run-as-root --oversubscribe $bind -np "$np" ${mpi_cfg[$cfg]} \
      build/bin/strata-perf all_reduce -b 8 -e 32K -f 4 -n 2000 -w 200 -z 1 --compare mpi \
      > "$f" 2>&1 || echo "failed: $f"
  done
done
