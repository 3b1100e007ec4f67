#!/usr/bin/env bash
# Produces the tables behind benchmarks/RESULTS.md: strata-perf with --compare mpi for each
# collective, world size and Open MPI configuration (Debian's Open MPI disables its UCX path by
# default, so its three plausible "best" configurations are all measured).
# Usage: benchmarks/compare_mpi.sh [outdir [small|quick]]   (after scripts/build.sh; `small`:
# only the small all-reduce sweep, the latency_*.txt files; `quick`: the regression guard, 64 KiB
# to 16 MiB, the vader and ucx configurations, 20 iterations, then the worst ratio per collective
# (benchmarks/summarize_results.py --quick); about 30 s here)
# The raw output goes to outdir (default build/bench-results/mpi, which git ignores), and
# benchmarks/pack_results.py packs it into one CSV beside it, outdir.csv, with these commands;
# benchmarks/summarize_results.py reads either.
set -euo pipefail
cd "$(dirname "$0")/.."
invocation="benchmarks/compare_mpi.sh${*:+ $*} (at $(git rev-parse --short HEAD 2>/dev/null ||
  echo '?'))"
out=${1:-build/bench-results/mpi}
out=${out%/}
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
sweep="-b 64K -e 256M -f 4 -n 5 -w 5"
small="-b 8 -e 32K -f 4 -n 2000 -w 200 -z 1"
quick="-b 64K -e 16M -f 4 -n 20 -w 5"
# pack ARGS...: outdir.csv, with this script's command and, per ARGS, each run's strata-perf ARGS
pack() {
  local cmds=(--command "$invocation") cfgs="MPI_CONFIG:" a cfg
  for a in "$@"; do
    cmds+=(--command "mpirun --allow-run-as-root --oversubscribe $bind -np N MPI_CONFIG \
build/bin/strata-perf $a")
  done
  for cfg in default vader ucx; do cfgs+=" $cfg = '${mpi_cfg[$cfg]}';"; done
  benchmarks/pack_results.py "$out" "$out.csv" --section "strata-perf against Open MPI" \
    "${cmds[@]}" --command "$cfgs"
  echo "packed: $out.csv"
}
if [[ $mode == quick ]]; then
  for np in 2 4; do
    for coll in all_reduce reduce_scatter all_gather all_to_all; do
      for cfg in vader ucx; do
        f="$out/${coll}_np${np}_${cfg}.txt"
        # shellcheck disable=SC2086
        mpirun --allow-run-as-root --oversubscribe $bind -np "$np" ${mpi_cfg[$cfg]} \
          build/bin/strata-perf "$coll" $quick --compare mpi \
          --json "${f%.txt}.json" > "$f" 2>&1 || echo "failed: $f"
      done
    done
  done
  pack "COLL $quick --compare mpi --json COLL_npN_CONFIG.json > COLL_npN_CONFIG.txt"
  exec benchmarks/summarize_results.py --quick "$out.csv"
fi
for np in 2 4; do
  for coll in all_reduce reduce_scatter all_gather all_to_all; do
    [[ -n $only_small ]] && break
    for cfg in default vader ucx; do
      f="$out/${coll}_np${np}_${cfg}.txt"
      echo "== $f"
      # shellcheck disable=SC2086
      mpirun --allow-run-as-root --oversubscribe $bind -np "$np" ${mpi_cfg[$cfg]} \
        build/bin/strata-perf "$coll" $sweep --compare mpi \
        --json "${f%.txt}.json" --plot "${f%.txt}.svg" > "$f" 2>&1 || echo "failed: $f"
    done
  done
  # Small all-reduces, 8 bytes to 32 KiB: latency, many iterations, blocking.
  for cfg in default vader ucx; do
    f="$out/latency_np${np}_${cfg}.txt"
    echo "== $f"
    # shellcheck disable=SC2086
    mpirun --allow-run-as-root --oversubscribe $bind -np "$np" ${mpi_cfg[$cfg]} \
      build/bin/strata-perf all_reduce $small --compare mpi \
      > "$f" 2>&1 || echo "failed: $f"
  done
done
latency="all_reduce $small --compare mpi > latency_npN_CONFIG.txt"
if [[ -n $only_small ]]; then
  pack "$latency"
else
  pack "COLL $sweep --compare mpi --json COLL_npN_CONFIG.json --plot COLL_npN_CONFIG.svg \
> COLL_npN_CONFIG.txt" "$latency"
fi
