#!/usr/bin/env bash
# Two builds of Strata, interleaved on the same runs as compare_mpi.sh (its default Open MPI
# configuration, Open MPI timed in every run as the reference): for a change that must not move
# a figure, such as a refactoring. Each (collective, world size) runs BEFORE then AFTER, so slow
# drifts of the machine hit both alike.
#   benchmarks/compare_builds.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR OUTDIR
# benchmarks/pack_results.py then packs OUTDIR into one CSV beside it, OUTDIR.csv.
set -euo pipefail
before=$1 after=$2 out=$3
mkdir -p "$out"
bind="--bind-to core:overload-allowed --map-by core"
for np in 2 4; do
  for coll in all_reduce reduce_scatter all_gather all_to_all; do
    for which in before after; do
      dir=$before; [[ $which == after ]] && dir=$after
      f="$out/${coll}_np${np}_${which}.txt"
      echo "== $f"
      # shellcheck disable=SC2086
      mpirun --allow-run-as-root --oversubscribe $bind -np "$np" \
        "$dir/bin/strata-perf" "$coll" -b 64K -e 256M -f 4 -n 5 -w 5 --compare mpi \
        > "$f" 2>&1 || echo "failed: $f"
    done
  done
  for which in before after; do
    dir=$before; [[ $which == after ]] && dir=$after
    f="$out/latency_np${np}_${which}.txt"
    echo "== $f"
    # shellcheck disable=SC2086
    mpirun --allow-run-as-root --oversubscribe $bind -np "$np" \
      "$dir/bin/strata-perf" all_reduce -b 8 -e 32K -f 4 -n 2000 -w 200 -z 1 --compare mpi \
      > "$f" 2>&1 || echo "failed: $f"
  done
done
# The table for RESULTS.md: Strata's out-of-place time before and after, and each run's ratio to
# Open MPI (vs_mpi: > 1 means Strata faster), which cancels what the machine did during that run.
python3 - "$out" <<'PY'
import pathlib, sys
out = pathlib.Path(sys.argv[1])
def rows(f):
    r = {}
    for line in f.read_text().splitlines():
        p = line.split()
        if len(p) == 14 and p[0].isdigit():
            r[int(p[0])] = (float(p[5]), float(p[13]))
    return r
print("| collective | ranks | size (B) | Strata us before | after | after/before | vs MPI before | after |")
print("|---|---|---|---|---|---|---|---|")
for before in sorted(out.glob("*_before.txt")):
    after = before.with_name(before.name.replace("_before", "_after"))
    coll, np = before.stem.rsplit("_", 2)[0], before.stem.rsplit("_", 2)[1]
    b, a = rows(before), rows(after)
    for size in sorted(set(b) & set(a)):
        print(f"| {coll} | {np[2:]} | {size} | {b[size][0]:g} | {a[size][0]:g} | "
              f"{a[size][0] / b[size][0]:.2f} | {b[size][1]:.2f} | {a[size][1]:.2f} |")
PY
"$(dirname "$0")/pack_results.py" "${out%/}" "${out%/}.csv" \
  --section "Two builds compared (compare_builds.sh)" \
  --command "benchmarks/compare_builds.sh $*"
