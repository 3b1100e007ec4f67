#!/usr/bin/env bash
# The 8-byte all-reduce of two builds at 2 and 4 ranks, the figure most exposed to per-call
# overhead: PAIRS interleaved pairs (default 3), the order alternated per pair (before-after,
# then after-before) because the second of two back-to-back runs here tends to be the slower;
# each run times Open MPI too (vs_mpi). Packs OUTDIR into OUTDIR.csv.
#   benchmarks/compare_builds_small.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR OUTDIR [PAIRS]
set -euo pipefail
before=$1 after=$2 out=$3 pairs=${4:-3}
mkdir -p "$out"
bind="--bind-to core:overload-allowed --map-by core"
for ((pair = 1; pair <= pairs; ++pair)); do
  for np in 2 4; do
    order="before after"
    ((pair % 2 == 0)) && order="after before"
    for which in $order; do
      dir=$before
      [[ $which == after ]] && dir=$after
      # shellcheck disable=SC2086
      mpirun --allow-run-as-root --oversubscribe $bind -np "$np" "$dir/bin/strata-perf" \
        all_reduce -b 8 -e 8 -n 4000 -w 200 --compare mpi \
        > "$out/p${pair}_np${np}_${which}.txt" 2>&1 || echo "failed: pair $pair np $np $which"
    done
  done
done
# Per build and world size: median and least time a call (out of place, in place), median vs_mpi.
python3 - "$out" <<'PY'
import pathlib, statistics as st, sys
runs = {}
for f in sorted(pathlib.Path(sys.argv[1]).glob("p*_np*_*.txt")):
    _, np, which = f.stem.split("_")
    for line in f.read_text().splitlines():
        p = line.split()
        if len(p) == 14 and p[0] == "8":
            runs.setdefault((np, which), []).append((float(p[5]), float(p[9]), float(p[13])))
print("| ranks | build | runs | out of place us: median, least | in place: median, least "
      "| vs MPI, median |")
print("|---|---|---|---|---|---|")
for (np, which), v in sorted(runs.items()):
    col = lambda i: [x[i] for x in v]
    print(f"| {np[2:]} | {which} | {len(v)} | {st.median(col(0)):.2f}, {min(col(0)):.2f} | "
          f"{st.median(col(1)):.2f}, {min(col(1)):.2f} | {st.median(col(2)):.2f} |")
PY
"$(dirname "$0")/pack_results.py" "${out%/}" "${out%/}.csv" \
  --section "The 8-byte all-reduce of two builds (compare_builds_small.sh)" \
  --command "benchmarks/compare_builds_small.sh $*"
